package e2e

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin"
)

// A plugin whose CRD is installed, removed and installed again five times: it reconciles while
// the CRD exists, goes quiet (no list/watch error storm) while it does not, and no informer or
// goroutine is left behind by a cycle.
func TestControllerFollowsItsCRD(t *testing.T) {
	ns := namespace(t)
	thing := schema.GroupVersionResource{Group: "follow.wasmrec.dev", Version: "v1", Resource: "things"}
	thingKey := cache.Key{GroupVersionKind: schema.GroupVersionKind{Group: "follow.wasmrec.dev", Version: "v1", Kind: "Thing"}}
	crds, err := crd.Read("testdata/things.yaml")
	must(t, err)

	logs := &logLines{}
	m := metrics.New()
	running := func() float64 {
		v, _ := value(t, m, "wasmrec_plugin_running", map[string]string{"plugin": "follow"})
		return v
	}
	// Loaded before its CRD exists: it waits.
	mgr, _ := pluginHostWithMetrics(t, cfg, logs.logger(), m, plugin.Config{Name: "follow", Module: wasmFile(t, "testguests", "follow"), Namespaces: []string{ns},
		Permissions: []abi.Permission{grant("follow.wasmrec.dev", []string{"things"}, "list", "watch")}})
	logs.waitFor(t, 30*time.Second, "waiting: not served", "Thing.v1.follow.wasmrec.dev (install the CRD that serves it, things.follow.wasmrec.dev)")
	if running() != 0 {
		t.Error("wasmrec_plugin_running is 1 while the CRD is missing")
	}
	baseGoroutines, baseInformers := settledGoroutines(), informerGoroutines()

	for cycle := 1; cycle <= 5; cycle++ {
		must(t, crd.Install(context.Background(), cfg, crds, 0))
		name := fmt.Sprint("t", cycle)
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "follow.wasmrec.dev/v1", "kind": "Thing", "metadata": map[string]any{"name": name}}}
		eventually(t, 30*time.Second, "creating a thing", func() error { // discovery may lag the CRD by a moment
			_, err := dyn(t).Resource(thing).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
			return err
		})
		logs.waitFor(t, 30*time.Second, fmt.Sprintf("reconciled %s/%s", ns, name))
		if running() != 1 {
			t.Errorf("cycle %d: wasmrec_plugin_running is 0 while the plugin reconciles", cycle)
		}

		errorsBefore, _ := logs.matching("list/watch failing", "things")
		must(t, crd.Uninstall(context.Background(), cfg, []string{"things.follow.wasmrec.dev"}, 0))
		eventually(t, 30*time.Second, "the thing informer released", func() error {
			if informerOf(mgr.GetCache(), thingKey) {
				return fmt.Errorf("cycle %d: still active", cycle)
			}
			return nil
		})
		time.Sleep(300 * time.Millisecond) // room for an error storm to show, if there were one
		if running() != 0 {
			t.Errorf("cycle %d: wasmrec_plugin_running is 1 after the CRD went", cycle)
		}
		errorsAfter, _ := logs.matching("list/watch failing", "things")
		if n := len(errorsAfter) - len(errorsBefore); n > 2 {
			t.Errorf("cycle %d: %d list/watch errors for the removed resource", cycle, n)
		}
	}
	if lines, _ := logs.matching("stopping: no longer served", "follow"); len(lines) < 5 {
		t.Errorf("the controller was stopped %d times, want 5", len(lines))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, inf := settledGoroutines(), informerGoroutines()
		if g <= baseGoroutines && inf <= baseInformers {
			t.Logf("goroutines %d (baseline %d), informer goroutines %d (baseline %d)", g, baseGoroutines, inf, baseInformers)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 cycles: %d goroutines (baseline %d), %d informer goroutines (baseline %d)\n%s", g, baseGoroutines, inf, baseInformers, goroutineDump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settledGoroutines counts goroutines, leaving out the HTTP client's idle connection loops,
// which come and go with the transport's keep-alives.
func settledGoroutines() int {
	n := 0
	for _, g := range strings.Split(goroutineDump(), "\n\n") {
		if !strings.Contains(g, "net/http.(*persistConn)") && !strings.Contains(g, "golang.org/x/net/http2") {
			n++
		}
	}
	return n
}

func goroutineDump() string {
	buf := make([]byte, 1<<22)
	return string(buf[:runtime.Stack(buf, true)])
}
