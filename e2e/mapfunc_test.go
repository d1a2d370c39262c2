package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// A plugin's map function that misbehaves costs that plugin alone, and says so: a map that
// spins is stopped at the plugin's timeout, named as a map with the setting to change and where
// it spun (its stack), and the same object version is not mapped again; one that panics is logged with its stack, and a
// streak of them makes the plugin Failing; requests it may not make are dropped, saying why;
// and a map that works enqueues what it returns.
func TestAMapFunctionThatMisbehaves(t *testing.T) {
	ns := namespace(t)
	m := metrics.New()
	logs := &logLines{}
	var dropped []string // what OnDropped was told, as a Plugin object's Events are
	var droppedMu sync.Mutex
	_, loaded := pluginHostWithMetrics(t, cfg, logs.logger(), m, plugin.Config{Name: "map", Module: wasmFile(t, "testguests", "map-go"), Namespaces: []string{ns},
		Timeout: &metav1.Duration{Duration: time.Second},
		Hooks: plugin.Hooks{OnDropped: func(msg string) {
			droppedMu.Lock()
			defer droppedMu.Unlock()
			dropped = append(dropped, msg)
		}},
		Permissions: []abi.Permission{
			grant("", []string{"configmaps"}, "get", "list", "watch", "create"),
			grant("", []string{"secrets", "namespaces"}, "get", "list", "watch"),
		}})
	p := loaded["map"]
	count := func(outcome string) float64 {
		v, _ := value(t, m, "wasmrec_plugin_maps_total", map[string]string{"plugin": "map", "outcome": outcome})
		return v
	}
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	put := func(name string, data map[string]string) {
		t.Helper()
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
		must(t, err)
	}

	put("spin", map[string]string{"spin": ""})
	logs.waitFor(t, 10*time.Second, `its map function did not return within 1s, the plugin's timeout (timeout in host.yaml`, "main.mapConfigMap")
	if n := count("timeout"); n != 1 {
		t.Fatalf("%g maps timed out, want 1", n)
	}
	// An update maps the old object, whose map timed out at this version, and the new one.
	_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "spin", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{})
	must(t, err)
	eventually(t, 10*time.Second, "the update's maps", func() error {
		if s, to := count("skipped"), count("timeout"); s != 1 || to != 2 {
			return fmt.Errorf("%g skipped, %g timed out; want 1 and 2", s, to)
		}
		return nil
	})

	for i := range plugin.FailingAfter {
		put(fmt.Sprintf("panic-%d", i), map[string]string{"panic": fmt.Sprint(i)})
	}
	line := logs.waitFor(t, 10*time.Second, "the plugin's map function failed", `panicked: told to panic: 4`)
	if !strings.Contains(line, `"stack"=`) || !strings.Contains(line, "main.mapConfigMap") {
		t.Fatalf("a map's panic logged without the guest's stack:\n%s", line)
	}
	eventually(t, 10*time.Second, "the plugin Failing", func() error {
		if f := p.Failing(); !strings.Contains(f, "every map of a watched object by the plugin's map function since") || !strings.Contains(f, "told to panic") {
			return fmt.Errorf("Failing() = %q", f)
		}
		return nil
	})

	// A map that works: what it may not enqueue is dropped, saying why; the rest is reconciled,
	// and the streak ends.
	reconciled := func() float64 {
		v, _ := value(t, m, "controller_runtime_reconcile_total", map[string]string{"controller": "map", "result": "success"})
		return v
	}
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 10*time.Second, "the secret's own reconcile", func() error {
		if n := reconciled(); n != 1 {
			return fmt.Errorf("%g reconciles", n)
		}
		return nil
	})
	put("targets", map[string]string{"targets": "plain,kube-system/x,/y"})
	eventually(t, 10*time.Second, "the reconcile the map enqueued", func() error {
		if n := reconciled(); n != 2 {
			return fmt.Errorf("%g reconciles", n)
		}
		return nil
	})
	logs.waitFor(t, 10*time.Second, "named an object it may not reconcile", `"name"="x"`, `"error"="its namespace is not one of the plugin's`)
	logs.waitFor(t, 10*time.Second, "named an object it may not reconcile", `"name"="y"`, `"error"="it has no namespace, and Secret is namespaced"`)
	// Its Plugin object would be told once a minute, not once a drop.
	droppedMu.Lock()
	if len(dropped) != 1 || !strings.Contains(dropped[0], "its map function named kube-system/x, which it may not reconcile (its namespace is not one of the plugin's") {
		t.Errorf("OnDropped told %q, want kube-system/x's drop once", dropped)
	}
	droppedMu.Unlock()
	if f := p.Failing(); f != "" {
		t.Errorf("Failing() = %q after a map that worked", f)
	}
	if n := count("ok"); n < 1 {
		t.Errorf("%g maps ok", n)
	}
}

// A map that finds no CPU slot of its share free before its timeout (another plugin of the
// share holds it) did not run: it is tried again later, and what it returns then is reconciled,
// so that a neighbour's long reconcile or loop does not lose the plugin the event.
func TestAMapThatFindsNoCPUSlotIsTriedAgain(t *testing.T) {
	ns := namespace(t)
	m := metrics.New()
	logs := &logLines{}
	share := wasm.NewCPUShare("the test's one core", 1)
	pluginHostWithMetrics(t, cfg, logs.logger(), m,
		plugin.Config{Name: "map", Module: wasmFile(t, "testguests", "map-go"), Namespaces: []string{ns}, CPU: share,
			Timeout: &metav1.Duration{Duration: time.Second},
			Permissions: []abi.Permission{
				grant("", []string{"configmaps"}, "get", "list", "watch", "create"),
				grant("", []string{"secrets", "namespaces"}, "get", "list", "watch"),
			}},
		plugin.Config{Name: "sleep", Module: wasmFile(t, "testguests", "misbehave"), Namespaces: []string{ns}, CPU: share,
			Timeout:     &metav1.Duration{Duration: time.Minute},
			Permissions: []abi.Permission{grant("", []string{"configmaps"}, "get", "list", "watch")}},
	)
	reconciled := func() float64 {
		v, _ := value(t, m, "controller_runtime_reconcile_total", map[string]string{"controller": "map", "result": "success"})
		return v
	}
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 10*time.Second, "the secret's own reconcile", func() error {
		if n := reconciled(); n != 1 {
			return fmt.Errorf("%g reconciles", n)
		}
		return nil
	})

	misbehaving(t, ns, "sleep-6") // holds the one slot 6 s
	logs.waitFor(t, 10*time.Second, `"msg"="sleeping"`)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "targets"}, Data: map[string]string{"targets": "plain"}}, metav1.CreateOptions{})
	must(t, err)
	logs.waitFor(t, 10*time.Second, "the plugin's map function could not run: it is tried again in", `"object"="`+ns+`/targets"`, "no CPU slot free")
	eventually(t, 60*time.Second, "the reconcile the map enqueued once it ran", func() error {
		if n := reconciled(); n != 2 {
			return fmt.Errorf("%g reconciles", n)
		}
		return nil
	})
	if v, _ := value(t, m, "wasmrec_plugin_maps_total", map[string]string{"plugin": "map", "outcome": "throttled"}); v < 1 {
		t.Errorf("%g maps counted throttled", v)
	}
}
