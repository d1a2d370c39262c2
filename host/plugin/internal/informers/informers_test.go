package informers_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
)

var (
	widgets = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	nodes   = schema.GroupVersionKind{Version: "v1", Kind: "Node"}
	gadgets = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"} // not served
)

// newCache is a host cache for an API server it never contacts: it is not started, so its
// informers are built and shared but never run. Widgets are namespaced, Nodes cluster-scoped.
func newCache(t *testing.T) *cache.Cache {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(widgets, meta.RESTScopeNamespace)
	mapper.Add(nodes, meta.RESTScopeRoot)
	c, err := cache.New(&rest.Config{Host: "https://apiserver.test"}, cache.Options{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func key(gvk schema.GroupVersionKind, ns string) cache.Key {
	return cache.Key{GroupVersionKind: gvk, Namespace: ns}
}

var prod, dev = key(widgets, "prod"), key(widgets, "dev")

func mustAcquire(t *testing.T, s *informers.Set, u informers.Use, k cache.Key) *cache.Informer {
	t.Helper()
	inf, err := s.Acquire(u, k)
	if err != nil {
		t.Fatal(err)
	}
	return inf
}

// Every use of a key shares one informer of the cache; it goes back to the cache when the last
// hold of the last use is let go of, not before.
func TestUsesShareOneInformerUntilTheLastLetsGo(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, nil)
	w1 := mustAcquire(t, s, informers.Watch, prod)
	w2 := mustAcquire(t, s, informers.Watch, prod) // a second source of the same key
	r := mustAcquire(t, s, informers.Read, prod)
	if w1 != w2 || w1 != r {
		t.Error("two holds of one key got two informers")
	}
	s.Release(informers.Watch, prod)
	s.Release(informers.Read, prod)
	if !c.Active(prod) {
		t.Fatal("the informer went back to the cache while a source still holds it")
	}
	s.Release(informers.Watch, prod)
	if c.Active(prod) {
		t.Error("the informer is still the cache's after every hold was let go of")
	}
	s.Release(informers.Watch, prod) // one too many: nothing
	if len(s.Keys()) != 0 {
		t.Errorf("keys %v after every hold was let go of", s.Keys())
	}
}

// Ensure holds a key once for its use, however often it is called; Release of that use then
// lets go of it.
func TestEnsureHoldsOnce(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, nil)
	for range 3 {
		if _, err := s.Ensure(informers.Read, prod); err != nil {
			t.Fatal(err)
		}
	}
	s.Release(informers.Read, prod)
	if c.Active(prod) {
		t.Error("three Ensures of one key needed more than one Release")
	}
}

// Hold makes a use hold exactly the keys given, and touches no other use's holds.
func TestHoldHoldsExactlyTheKeysGiven(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, nil)
	mustAcquire(t, s, informers.Watch, dev)
	if err := s.Hold(informers.Warm, []cache.Key{prod, dev}); err != nil {
		t.Fatal(err)
	}
	if got := s.Keys(informers.Warm); !slices.Equal(got, []cache.Key{dev, prod}) {
		t.Errorf("warm keys %v, want dev and prod", got)
	}
	if err := s.Hold(informers.Warm, nil); err != nil {
		t.Fatal(err)
	}
	if len(s.Keys(informers.Warm)) != 0 || c.Active(prod) {
		t.Errorf("after holding none, warm still holds %v (prod active: %v)", s.Keys(informers.Warm), c.Active(prod))
	}
	if !c.Active(dev) || !slices.Equal(s.Keys(informers.Watch), []cache.Key{dev}) {
		t.Error("warm letting go of dev let go of the sources' hold on it")
	}
	if err := s.Add(informers.Warm, []cache.Key{prod}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(informers.Warm, []cache.Key{dev}); err != nil {
		t.Fatal(err)
	}
	if got := s.Keys(informers.Warm); !slices.Equal(got, []cache.Key{dev, prod}) {
		t.Errorf("warm keys %v after adding dev to prod, want both", got)
	}
}

// ReleaseAll lets go of every hold of one use, whatever its count, and of that use only.
func TestReleaseAllLetsGoOfOneUse(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, nil)
	mustAcquire(t, s, informers.Read, prod)
	mustAcquire(t, s, informers.Read, dev)
	mustAcquire(t, s, informers.List, dev)
	mustAcquire(t, s, informers.List, dev)
	s.ReleaseAll(informers.List)
	if got := s.Keys(informers.List); len(got) != 0 {
		t.Errorf("list still holds %v", got)
	}
	if got := s.Keys(); !slices.Equal(got, []cache.Key{dev, prod}) {
		t.Errorf("keys %v, want the reads' dev and prod", got)
	}
	s.ReleaseAll(informers.Read)
	if c.Active(prod) || c.Active(dev) {
		t.Error("informers are still the cache's after both uses let go")
	}
}

// Close lets go of everything, whatever holds it, and refuses what comes after: a reconcile
// that comes back after its plugin closed cannot take an informer nothing would let go of.
func TestCloseLetsGoOfEverythingAndRefusesLaterAcquires(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, nil)
	mustAcquire(t, s, informers.Watch, prod)
	mustAcquire(t, s, informers.Read, dev)
	s.Close()
	if c.Active(prod) || c.Active(dev) {
		t.Fatal("informers are still the cache's after Close")
	}
	if _, err := s.Ensure(informers.Read, prod); !errors.Is(err, informers.ErrClosed) {
		t.Errorf("Ensure after Close returned %v, want ErrClosed", err)
	}
	if err := s.Hold(informers.Warm, []cache.Key{prod}); !errors.Is(err, informers.ErrClosed) {
		t.Errorf("Hold after Close returned %v, want ErrClosed", err)
	}
	s.Release(informers.Watch, prod) // a source stopping late: nothing
	if c.Active(prod) || len(s.Keys()) != 0 {
		t.Error("something is held after Close")
	}
}

// A kind the cache cannot serve is an error, and leaves nothing held.
func TestAnUnservedKindIsAnErrorAndHoldsNothing(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, nil)
	_, err := s.Acquire(informers.Watch, key(gadgets, "prod"))
	if err == nil || !strings.Contains(err.Error(), "no resource serves") {
		t.Fatalf("Acquire of an unserved kind returned %v, want the cache's error", err)
	}
	if got := s.Keys(); len(got) != 0 {
		t.Errorf("keys %v after a failed acquire", got)
	}
	mustAcquire(t, s, informers.Watch, prod)
	if err := s.Hold(informers.Warm, []cache.Key{dev, key(gadgets, "")}); err == nil {
		t.Fatal("Hold of an unserved kind returned no error")
	}
}

// Keys are the cache's keys: a cluster-scoped kind asked for in two namespaces is one informer
// of the cache, listed once; each asked key is still held and let go of apart.
func TestKeysAreTheCachesKeys(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, nil)
	mustAcquire(t, s, informers.Read, key(nodes, "prod"))
	mustAcquire(t, s, informers.Read, key(nodes, "dev"))
	if got := s.Keys(); !slices.Equal(got, []cache.Key{key(nodes, "")}) {
		t.Errorf("keys %v, want the one informer of Nodes", got)
	}
	s.Release(informers.Read, key(nodes, "prod"))
	if !c.Active(key(nodes, "")) {
		t.Fatal("the Nodes informer went back while the other namespace's read holds it")
	}
	s.Release(informers.Read, key(nodes, "dev"))
	if c.Active(key(nodes, "")) {
		t.Error("the Nodes informer is still the cache's")
	}
}

// onNew is told each time a use comes to hold a key it did not hold, outside the Set's lock
// (it may read the Set).
func TestOnNewIsToldOfEachNewHold(t *testing.T) {
	c := newCache(t)
	var told []string
	var s *informers.Set
	s = informers.New(c, func(u informers.Use, k cache.Key) {
		told = append(told, fmt.Sprintf("%s %s %d", u, k.Namespace, len(s.Keys(u))))
	})
	mustAcquire(t, s, informers.Read, prod)
	mustAcquire(t, s, informers.Read, prod)
	if _, err := s.Ensure(informers.Read, prod); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, s, informers.Watch, prod)
	s.ReleaseAll(informers.Read)
	if _, err := s.Ensure(informers.Read, prod); err != nil {
		t.Fatal(err)
	}
	want := []string{"read prod 1", "watch prod 1", "read prod 1"}
	if !slices.Equal(told, want) {
		t.Errorf("told %q, want %q", told, want)
	}
}

// A lender acquires and releases for its use, as a source does.
func TestALenderHoldsForItsUse(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, nil)
	l := s.For(informers.Watch)
	if _, err := l.Acquire(prod); err != nil {
		t.Fatal(err)
	}
	if got := s.Keys(informers.Watch); !slices.Equal(got, []cache.Key{prod}) {
		t.Errorf("watch keys %v, want prod", got)
	}
	l.Release(prod)
	if c.Active(prod) {
		t.Error("the lender's release did not let go")
	}
}

// Uses acquiring and letting go at once, on the same keys, leave the cache's count right: once
// all let go, nothing is held and the cache has no informer.
func TestConcurrentUsesLeaveNothingHeld(t *testing.T) {
	c := newCache(t)
	s := informers.New(c, func(informers.Use, cache.Key) {})
	keys := []cache.Key{prod, dev, key(nodes, "prod"), key(nodes, "")}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			u := informers.Use(g % 4)
			for i := range 200 {
				k := keys[(g+i)%len(keys)]
				switch i % 3 {
				case 0:
					if _, err := s.Acquire(u, k); err != nil {
						t.Error(err)
						return
					}
					s.Keys()
					s.Release(u, k)
				case 1:
					if _, err := s.Ensure(u, k); err != nil {
						t.Error(err)
						return
					}
				case 2:
					if err := s.Hold(u, keys[:i%len(keys)]); err != nil {
						t.Error(err)
						return
					}
				}
			}
			s.ReleaseAll(u)
		})
	}
	wg.Wait()
	if got := s.Keys(); len(got) != 0 {
		t.Errorf("keys %v after every use let go", got)
	}
	for _, k := range keys {
		if c.Active(k) {
			t.Errorf("the cache still has the %s informer", k)
		}
	}
}
