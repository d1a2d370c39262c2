package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin"
)

var thingGVR = schema.GroupVersionResource{Group: "follow.wasmrec.dev", Version: "v1", Resource: "things"}

func installThings(t *testing.T) {
	t.Helper()
	crds, err := crd.Read("testdata/things.yaml")
	must(t, err)
	must(t, crd.Install(context.Background(), cfg, crds, 0))
	t.Cleanup(func() {
		if err := crd.Uninstall(context.Background(), cfg, []string{"things.follow.wasmrec.dev"}, 0); err != nil {
			t.Error(err)
		}
	})
}

// writeModule replaces the file at path with a module, as a deploy tool would: write beside,
// rename over.
func writeModule(t testing.TB, path string, wasmBytes []byte) {
	t.Helper()
	tmp := path + ".tmp"
	must(t, os.WriteFile(tmp, wasmBytes, 0o644))
	must(t, os.Rename(tmp, path))
}

type write struct {
	name string
	n    int
	at   time.Time
}

// percentile of sorted durations.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// A writer changes Things continuously while the plugin's module file is swapped 20 times:
// every change is reconciled at least once after it happened, no key is reconciled by two
// versions (or two workers) at once, and the controller never restarts.
func TestSwapUnderLoad(t *testing.T) {
	installThings(t)
	ns := namespace(t)
	v1, v2 := module2(t, "swap-v1"), module2(t, "swap-v2")
	path := filepath.Join(t.TempDir(), "swap.wasm")
	writeModule(t, path, v1)

	logs := &logLines{}
	m := metrics.New()
	mgr, plugins := pluginHostWithMetrics(t, cfg, logs.logger(), m, plugin.Config{Name: "swap", Module: path, Namespaces: []string{ns},
		MaxConcurrentReconciles: 4, Permissions: []abi.Permission{grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch")}})
	p := plugins["swap"]
	must(t, mgr.Add(p.Triggers()[0])) // the file watcher

	const objects = 10
	for i := range objects {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "follow.wasmrec.dev/v1", "kind": "Thing",
			"metadata": map[string]any{"name": fmt.Sprint("thing-", i)}, "spec": map[string]any{"n": int64(0)}}}
		eventually(t, 30*time.Second, "creating a thing", func() error {
			_, err := dyn(t).Resource(thingGVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
			return err
		})
	}
	for i := range objects {
		logs.waitFor(t, 30*time.Second, fmt.Sprintf("v1 reconciled thing-%d n=0", i))
	}
	// A plugin limited to a namespace watches and reads through an informer of that namespace:
	// the host lists no Things across the cluster for it.
	thing := schema.GroupVersionKind{Group: "follow.wasmrec.dev", Version: "v1", Kind: "Thing"}
	if c := mgr.GetCache(); c.Active(cache.Key{GroupVersionKind: thing}) || !c.Active(cache.Key{GroupVersionKind: thing, Namespace: ns}) {
		t.Fatalf("Thing informers: cluster-wide %v, in %s %v; want only the namespace's", c.Active(cache.Key{GroupVersionKind: thing}), ns, c.Active(cache.Key{GroupVersionKind: thing, Namespace: ns}))
	}

	// The writer bumps spec.n of each Thing in turn, as fast as the API server takes it.
	var (
		mu     sync.Mutex
		writes []write
		phase  = map[string][2]time.Time{}
	)
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for n := 1; ; n++ {
			for i := range objects {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprint("thing-", i)
				at := time.Now()
				patch := fmt.Appendf(nil, `{"spec":{"n":%d}}`, n)
				if _, err := dyn(t).Resource(thingGVR).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Errorf("writer: %v", err)
					return
				}
				mu.Lock()
				writes = append(writes, write{name, n, at})
				mu.Unlock()
			}
		}
	}()
	mark := func(name string, f func()) {
		start := time.Now()
		f()
		phase[name] = [2]time.Time{start, time.Now()}
	}
	mark("before", func() { time.Sleep(2 * time.Second) })
	mark("during", func() {
		for i := 1; i <= 20; i++ {
			next := v2
			if i%2 == 0 {
				next = v1
			}
			writeModule(t, path, next)
			want := digestOf(next)
			eventually(t, 30*time.Second, fmt.Sprintf("swap %d to %s", i, want), func() error {
				if got := p.Module().Digest(); got != want {
					return fmt.Errorf("running %s", got)
				}
				return nil
			})
		}
	})
	mark("after", func() { time.Sleep(2 * time.Second) })
	close(stop)
	<-writerDone

	// Every object's last value is reconciled (so every change was, after it happened).
	mu.Lock()
	last := map[string]int{}
	for _, w := range writes {
		last[w.name] = max(last[w.name], w.n)
	}
	mu.Unlock()
	for name, n := range last {
		logs.waitFor(t, 30*time.Second, fmt.Sprintf(" reconciled %s n=%d\"", name, n))
	}

	// Read the reconciles back from the log, in the order they happened.
	re := regexp.MustCompile(`"msg"="v(\d) (begin|reconciled|end) (thing-\d+)(?: n=(\d+))?"`)
	type seen struct {
		n  int
		at time.Time
	}
	reconciled := map[string][]seen{}
	inFlight := map[string]string{}
	versions := map[string]bool{}
	logs.mu.Lock()
	for i, line := range logs.lines {
		mm := re.FindStringSubmatch(line)
		if mm == nil {
			continue
		}
		version, what, name := mm[1], mm[2], mm[3]
		versions[version] = true
		switch what {
		case "begin":
			if other, busy := inFlight[name]; busy {
				t.Errorf("%s: v%s began while a v%s reconcile of it was still running", name, version, other)
			}
			inFlight[name] = version
		case "end":
			delete(inFlight, name)
		case "reconciled":
			n, _ := strconv.Atoi(mm[4])
			reconciled[name] = append(reconciled[name], seen{n, logs.times[i]})
		}
	}
	logs.mu.Unlock()
	if !versions["1"] || !versions["2"] {
		t.Errorf("reconciles ran on versions %v, want both", versions)
	}

	// Latency from each write to the first reconcile that saw it (or a later value).
	latency := map[string][]time.Duration{}
	for _, w := range writes {
		var got time.Duration = -1
		for _, s := range reconciled[w.name] {
			if s.n >= w.n && !s.at.Before(w.at) {
				got = s.at.Sub(w.at)
				break
			}
		}
		if got < 0 {
			t.Errorf("%s n=%d (written at %s) was never reconciled after it was written", w.name, w.n, w.at.Format(time.StampMicro))
			continue
		}
		for name, span := range phase {
			if !w.at.Before(span[0]) && w.at.Before(span[1]) {
				latency[name] = append(latency[name], got)
			}
		}
	}
	for _, name := range []string{"before", "during", "after"} {
		d := latency[name]
		slices.Sort(d)
		t.Logf("%-6s %4d changes: write-to-reconcile p50 %s, p99 %s", name, len(d), percentile(d, 0.50).Round(100*time.Microsecond), percentile(d, 0.99).Round(100*time.Microsecond))
	}
	if lines, _ := logs.matching(`"msg"="starting workers"`, `"controller"="swap"`); len(lines) != 1 {
		t.Errorf("the controller started %d times, want once: a swap must not restart it", len(lines))
	}
	if v, _ := value(t, m, "wasmrec_plugin_swaps_total", map[string]string{"plugin": "swap", "outcome": "swapped"}); v != 20 {
		t.Errorf("wasmrec_plugin_swaps_total{outcome=swapped} = %v, want 20", v)
	}
}

// A module that must not run (wrong ABI, asking for more than the grant, watching something
// else, a corrupt file) is refused and the running one keeps serving.
func TestSwapRefusals(t *testing.T) {
	installThings(t)
	ns := namespace(t)
	v1 := module2(t, "swap-v1")
	path := filepath.Join(t.TempDir(), "swap.wasm")
	writeModule(t, path, v1)
	logs := &logLines{}
	_, plugins := pluginHost(t, cfg, logs.logger(), plugin.Config{Name: "swap", Module: path, Namespaces: []string{ns},
		Permissions: []abi.Permission{grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch"), grant("", []string{"configmaps"}, "get", "list", "watch")}})
	p := plugins["swap"]
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"abi v7", module2(t, "abi7"), "plugin speaks ABI v7, host speaks v1"},
		{"greedy", mustRead(t, wasmFile(t, "plugins", "app")), "asks for permissions it was not granted"},
		{"another For kind", module2(t, "misbehave"), "a plugin keeps its For kind"},
		{"corrupt", v1[:len(v1)/2], "the module is cut short"},
	} {
		err := p.Swap(context.Background(), tc.wasm)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Swap = %v, want an error containing %q", tc.name, err, tc.want)
		}
		if got := p.Module().Digest(); got != digestOf(v1) {
			t.Fatalf("%s: the running module changed to %s", tc.name, got)
		}
	}
	// The refused attempts did not disturb it.
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "follow.wasmrec.dev/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "still"}, "spec": map[string]any{"n": int64(7)}}}
	eventually(t, 30*time.Second, "creating a thing", func() error {
		_, err := dyn(t).Resource(thingGVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		return err
	})
	logs.waitFor(t, 30*time.Second, "v1 reconciled still n=7")
}

func module2(t testing.TB, name string) []byte { return mustRead(t, wasmFile(t, "testguests", name)) }

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// A swap to a module that watches more adds the watch (and its informer) without a restart; a
// swap back removes it and releases the informer.
func TestSwapChangesWatches(t *testing.T) {
	installThings(t)
	ns := namespace(t)
	path := filepath.Join(t.TempDir(), "swap.wasm")
	writeModule(t, path, module2(t, "swap-v1"))
	logs := &logLines{}
	mgr, plugins := pluginHost(t, cfg, logs.logger(), plugin.Config{Name: "swap", Module: path, Namespaces: []string{ns}, Permissions: []abi.Permission{
		grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch"), grant("", []string{"configmaps"}, "list", "watch")}})
	p := plugins["swap"]
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "follow.wasmrec.dev/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"n": int64(1)}}}
	eventually(t, 30*time.Second, "creating a thing", func() error {
		_, err := dyn(t).Resource(thingGVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		return err
	})
	logs.waitFor(t, 30*time.Second, "v1 reconciled a n=1")
	cmKey := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	if informerOf(mgr.GetCache(), cmKey) {
		t.Fatal("a configmap informer runs before any module watches configmaps")
	}

	must(t, p.Swap(context.Background(), module2(t, "swap-v3")))
	logs.waitFor(t, 30*time.Second, "v3 reconciled a n=1") // the re-enqueue after the swap
	before, _ := logs.matching("v3 reconciled a n=1")
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nudge"}}, metav1.CreateOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "a reconcile caused by the configmap", func() error {
		if after, _ := logs.matching("v3 reconciled a n=1"); len(after) <= len(before) {
			return fmt.Errorf("no new reconcile")
		}
		return nil
	})
	if !informerOf(mgr.GetCache(), cmKey) {
		t.Fatal("no configmap informer while the module watches configmaps")
	}
	if lines, _ := logs.matching(`"msg"="starting workers"`, `"controller"="swap"`); len(lines) != 1 {
		t.Errorf("the controller started %d times: changing watches must not restart it", len(lines))
	}

	must(t, p.Swap(context.Background(), module2(t, "swap-v1")))
	eventually(t, 10*time.Second, "the configmap informer released", func() error {
		if informerOf(mgr.GetCache(), cmKey) {
			return fmt.Errorf("still active")
		}
		return nil
	})
}

// A module on a ConfigMap or Secret volume is swapped in when kubelet updates the volume (it
// writes a new timestamped directory and swaps the `..data` symlink the file points through),
// and so is one edited in place; a deleted module is logged and the running one keeps serving.
func TestSwapFromAVolume(t *testing.T) {
	installThings(t)
	ns := namespace(t)
	vol := t.TempDir()
	update := func(version int, wasmBytes []byte) { // what kubelet's atomic writer does
		t.Helper()
		ts := filepath.Join(vol, fmt.Sprintf("..2026_11_23_12_00_0%d.000000001", version))
		must(t, os.Mkdir(ts, 0o755))
		must(t, os.WriteFile(filepath.Join(ts, "swap.wasm"), wasmBytes, 0o644))
		must(t, os.Symlink(filepath.Base(ts), filepath.Join(vol, "..data_tmp")))
		must(t, os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")))
	}
	update(1, module2(t, "swap-v1"))
	path := filepath.Join(vol, "swap.wasm")
	must(t, os.Symlink(filepath.Join("..data", "swap.wasm"), path))

	logs := &logLines{}
	mgr, plugins := pluginHost(t, cfg, logs.logger(), plugin.Config{Name: "swap", Module: path, Namespaces: []string{ns},
		Permissions: []abi.Permission{grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch"), grant("", []string{"configmaps"}, "get", "list", "watch")}})
	p := plugins["swap"]
	must(t, mgr.Add(p.Triggers()[0])) // the file watcher
	swappedTo := func(what string, wasmBytes []byte) {
		t.Helper()
		eventually(t, 30*time.Second, what, func() error {
			if got, want := p.Module().Digest(), digestOf(wasmBytes); got != want {
				return fmt.Errorf("running %s, want %s", got, want)
			}
			return nil
		})
	}

	v2 := module2(t, "swap-v2")
	update(2, v2)
	swappedTo("the volume's update swapped in", v2)

	// Edited in place: the file kubelet's symlink points at now, written over.
	v1 := module2(t, "swap-v1")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	_, err = f.Write(v1)
	must(t, errors.Join(err, f.Close()))
	swappedTo("the module edited in place swapped in", v1)

	must(t, os.Remove(path))
	logs.waitFor(t, 10*time.Second, "reading the changed module file; the current module keeps serving", "no such file")
	if got := p.Module().Digest(); got != digestOf(v1) {
		t.Fatalf("after the file was deleted the plugin runs %s", got)
	}
}

// informerOf reports whether c holds an informer of k's kind, in k's mode (full or metadata
// only), in any namespace: a plugin given namespaces has one per namespace.
func informerOf(c *cache.Cache, k cache.Key) bool {
	for _, a := range c.ActiveKeys(k.GroupVersionKind) {
		if a.MetadataOnly == k.MetadataOnly {
			return true
		}
	}
	return false
}
