package plugin

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// These tests run the swap protocol with no control plane: the manager is never started, its
// client points nowhere, and kinds resolve through a fixed RESTMapper. The modules are the
// hot-swap guest as clang built it (`make testguests`): v1 and v2 reconcile Things, v3 also
// watches ConfigMaps, v5 watches Secrets and asks for them.

var (
	thingGVK  = schema.GroupVersionKind{Group: "follow.wasmrec.dev", Version: "v1", Kind: "Thing"}
	cmGVK     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

func offlineHost(t *testing.T) (*Host, *metrics.Metrics) {
	t.Helper()
	return offlineHostOf(t, thingGVK, cmGVK, secretGVK)
}

// offlineHostOf is an offline host whose API server serves kinds, namespaced.
func offlineHostOf(t *testing.T, kinds ...schema.GroupVersionKind) (*Host, *metrics.Metrics) {
	t.Helper()
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range kinds {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{Cache: cache.Options{Mapper: m}, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close(context.Background()) })
	met := metrics.New()
	h, err := NewHost(mgr, HostOptions{Engine: engine, Metrics: met})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, met
}

func swapGuest(t *testing.T, version string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../bin/testguests/swap-v" + version + ".wasm")
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	return b
}

func thingsGrant(more ...abi.Permission) Config {
	return Config{Name: "swap", Module: "swap.wasm", Permissions: append([]abi.Permission{
		{Group: "follow.wasmrec.dev", Resources: []string{"things"}, Verbs: []string{"get", "list", "watch"}}}, more...)}
}

func load(t *testing.T, h *Host, cfg Config, wasmBytes []byte) *Plugin {
	t.Helper()
	p, err := h.Load(context.Background(), cfg, wasmBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func compiles(m *metrics.Metrics, plugin string) float64 {
	return testutil.ToFloat64(m.Compiles.WithLabelValues(plugin))
}

func TestSwapPublishesAndRollsBackWithoutCompiling(t *testing.T) {
	h, m := offlineHost(t)
	v1, v2 := swapGuest(t, "1"), swapGuest(t, "2")
	var events []SwapEvent
	cfg := thingsGrant()
	cfg.Hooks.OnSwap = func(e SwapEvent) { events = append(events, e) }
	p := load(t, h, cfg, v1)
	ctx := context.Background()

	if err := p.Swap(ctx, v2); err != nil {
		t.Fatal(err)
	}
	if got, want := p.Module().Digest(), digestOf(v2); got != want {
		t.Fatalf("serving %s after the swap, want %s", got, want)
	}
	// A swap to the digest serving does nothing, and says so (a refusal of what the source
	// held in between no longer applies).
	if err := p.Swap(ctx, v2); err != nil || len(events) != 2 || !events[1].Unchanged || events[1].To != digestOf(v2) {
		t.Fatalf("a swap to the digest serving: %v, events %+v; want nothing done, told as Unchanged", err, events)
	}
	events = events[:1]
	// v1 is kept once its reconciles are back, in the background: none runs here.
	for deadline := time.Now().Add(5 * time.Second); !slices.Contains(p.kept.Digests(), digestOf(v1)); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("v1 was not kept within 5s of the swap away from it")
		}
	}
	before := compiles(m, "swap")
	if err := p.Swap(ctx, v1); err != nil {
		t.Fatal(err)
	}
	if got := compiles(m, "swap"); got != before {
		t.Errorf("a swap back to v1 compiled %g times; it was kept compiled", got-before)
	}
	if len(events) != 2 || !events[1].Rollback || events[1].To != digestOf(v1) {
		t.Errorf("events %+v: want the second a rollback to v1", events)
	}
}

func TestSwapRefusedForWhatItIsIsNotCompiledAgain(t *testing.T) {
	h, m := offlineHost(t)
	p := load(t, h, thingsGrant(), swapGuest(t, "1"))
	ctx := context.Background()
	serving := p.Module().Digest()

	// v5 asks for list and watch on Secrets, which the grant does not hold.
	v5 := swapGuest(t, "5")
	err := p.Swap(ctx, v5)
	if err == nil || !strings.Contains(err.Error(), "secrets") {
		t.Fatalf("swap to a module asking for Secrets: %v; want a refusal naming secrets", err)
	}
	if p.Module().Digest() != serving {
		t.Fatal("a refused module serves")
	}
	n := compiles(m, "swap")
	for range 3 {
		var before *RefusedBeforeError
		if err := p.Swap(ctx, v5); !errors.As(err, &before) || before.Digest != digestOf(v5) {
			t.Fatalf("swap to the refused module again: %v; want a RefusedBeforeError", err)
		}
	}
	if got := compiles(m, "swap"); got != n {
		t.Errorf("the refused module was compiled %g more times", got-n)
	}
	// Not a module: refused by the compiler, and remembered too.
	garbage := []byte("\x00asm\x01\x00\x00\x00garbage")
	if err := p.Swap(ctx, garbage); err == nil {
		t.Fatal("garbage swapped in")
	}
	if err := p.Swap(ctx, garbage); !errors.As(err, new(*RefusedBeforeError)) {
		t.Errorf("garbage again: %v; want a RefusedBeforeError", err)
	}
}

func TestSwapToAModuleWatchingAnotherKindStartsItsWatchesFirst(t *testing.T) {
	h, _ := offlineHost(t)
	cm := abi.Permission{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}
	p := load(t, h, thingsGrant(cm), swapGuest(t, "1"))
	if err := p.Swap(context.Background(), swapGuest(t, "3")); err != nil {
		t.Fatal(err)
	}
	kinds := p.Kinds()
	if len(kinds) != 2 || kinds[0] != cmGVK || kinds[1] != thingGVK {
		t.Errorf("kinds after a swap to v3: %v; want ConfigMap and Thing", kinds)
	}
	if err := p.Swap(context.Background(), swapGuest(t, "1")); err != nil {
		t.Fatal(err)
	}
	if kinds := p.Kinds(); len(kinds) != 1 || kinds[0] != thingGVK {
		t.Errorf("kinds after the swap back: %v; want Thing alone", kinds)
	}
}

func TestCloseLetsGoOfTheVersionsKept(t *testing.T) {
	h, _ := offlineHost(t)
	p, err := h.Load(context.Background(), thingsGrant(), swapGuest(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	old := p.Module().Digest()
	if err := p.Swap(context.Background(), swapGuest(t, "2")); err != nil {
		t.Fatal(err)
	}
	// The old module is retired in the background, then kept compiled for a swap back.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(p.kept.Digests(), old) {
		if time.Now().After(deadline) {
			t.Fatalf("the swapped-out module was not kept: %v", p.kept.Digests())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if kept := p.kept.Digests(); len(kept) != 0 {
		t.Errorf("versions still kept after Close: %v", kept)
	}
	// The name is free again.
	load(t, h, thingsGrant(), swapGuest(t, "1"))
}

func TestAPluginInNamespacesWatchesThroughTheirInformersOnly(t *testing.T) {
	h, _ := offlineHost(t)
	cfg := thingsGrant(abi.Permission{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}})
	cfg.Namespaces = []string{"team-a", "team-b"}
	p := load(t, h, cfg, swapGuest(t, "3")) // Things, and the ConfigMaps of their namespaces
	var got []string
	for _, k := range p.currentKeys() {
		got = append(got, k.String())
	}
	want := []string{
		"ConfigMap.v1 in namespace team-a", "ConfigMap.v1 in namespace team-b",
		"Thing.v1.follow.wasmrec.dev in namespace team-a", "Thing.v1.follow.wasmrec.dev in namespace team-b",
	}
	if !slices.Equal(got, want) {
		t.Errorf("informers %q; want one per kind and namespace, none cluster-wide: %q", got, want)
	}
}

// Close lets go of every informer the plugin holds, whatever holds it, and a read that comes
// after (a shadow reconcile that outlived its controller) cannot take one again: nothing would
// ever let go of it.
func TestCloseLetsGoOfEveryInformer(t *testing.T) {
	h, _ := offlineHost(t)
	p, err := h.Load(context.Background(), thingsGrant(), swapGuest(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, _ = p.reader.Get(ctx, thingGVK, "prod", "a") // the cache does not run: it never syncs
	key := cache.Key{GroupVersionKind: thingGVK}
	if !h.mgr.GetCache().Active(key) {
		t.Fatal("a read did not take the informer of what it read")
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.mgr.GetCache().Active(key) {
		t.Error("the read's informer is still the cache's after Close")
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := p.reader.Get(ctx, thingGVK, "prod", "a"); !errors.Is(err, informers.ErrClosed) {
		t.Errorf("a read after Close returned %v, want informers.ErrClosed", err)
	}
	if h.mgr.GetCache().Active(key) {
		t.Error("a read after Close took an informer again")
	}
}

// Where the plugin's controller runs, a swap to new watches waits for their informers to sync
// before it adds them, even with no warmer holding them (a replica that shares plugins and
// does not stand by warm): here they never sync, so the swap fails at its deadline and the
// watches stay the old version's.
func TestASwapWaitsForItsNewWatchesWhereTheControllerRuns(t *testing.T) {
	h, _ := offlineHost(t)
	cm := abi.Permission{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}
	p := load(t, h, thingsGrant(cm), swapGuest(t, "1"))
	p.running.Store(true) // as Host.Run says once the controller starts; no warmer runs
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := p.Swap(ctx, swapGuest(t, "3"))
	if err == nil || !strings.Contains(err.Error(), "did not sync") {
		t.Fatalf("a swap to watches that cannot sync returned %v; want an error that says they did not sync", err)
	}
	if kinds := p.Kinds(); len(kinds) != 1 || kinds[0] != thingGVK {
		t.Errorf("kinds after the failed swap: %v; want Thing alone", kinds)
	}
	if keys := p.infs.Keys(); len(keys) != 0 {
		t.Errorf("the failed swap left informers held: %v", keys)
	}
}

// A kind not served at load is taken for namespaced: a plugin of two namespaces watches it
// through an informer per namespace. Once it is served, cluster-scoped, the plugin's next start
// watches it once for all.
func TestAKindServedAfterTheLoadIsWatchedAsItsScopeSays(t *testing.T) {
	h, _ := offlineHostOf(t, cmGVK) // Things are not served
	cfg := thingsGrant()
	cfg.Namespaces = []string{"a", "b"}
	p := load(t, h, cfg, swapGuest(t, "1"))
	if got := keyNames(p.currentKeys()); len(got) != 2 {
		t.Fatalf("keys of a kind not served: %q; want one per namespace", got)
	}
	h.mapper.(*meta.DefaultRESTMapper).Add(thingGVK, meta.RESTScopeRoot)
	if err := p.placeSources(); err != nil {
		t.Fatal(err)
	}
	want := []string{"Thing.v1.follow.wasmrec.dev"}
	if got := keyNames(p.currentKeys()); !slices.Equal(got, want) {
		t.Errorf("keys once served, cluster-scoped: %q; want %q", got, want)
	}
	if got := len(p.allSources()); got != 1 {
		t.Errorf("%d sources; want one", got)
	}
}
