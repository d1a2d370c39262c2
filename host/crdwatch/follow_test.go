package crdwatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/cache"
)

var (
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	thingGVK     = schema.GroupVersionKind{Group: "follow.wasmrec.dev", Version: "v1", Kind: "Thing"}
)

// offlineWatcher is a Watcher with no API server behind it: ConfigMaps are served (a fixed
// RESTMapper), and Thing is a kind a CRD defined that is not served now.
func offlineWatcher(t *testing.T) *Watcher {
	t.Helper()
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(configMapGVK, meta.RESTScopeNamespace)
	c, err := cache.New(&rest.Config{Host: "http://127.0.0.1:1"}, cache.Options{Mapper: m})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(c, logr.Discard())
	w.crdGKs[thingGVK.GroupKind()] = true
	close(w.synced)
	return w
}

// runnable records its starts and runs until stopped.
type runnable struct{ started chan struct{} }

func (r *runnable) Start(ctx context.Context) error {
	r.started <- struct{}{}
	<-ctx.Done()
	return nil
}

func TestSetKindsWakesARunnableWaitingForAKindItNoLongerNeeds(t *testing.T) {
	w := offlineWatcher(t)
	r := &runnable{started: make(chan struct{}, 1)}
	stopped := make(chan struct{}, 1)
	f := Follow(w, []schema.GroupVersionKind{configMapGVK, thingGVK}, r, logr.Discard(), func(on bool) {
		if !on {
			stopped <- struct{}{}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Start(ctx) }()
	defer func() { cancel(); <-done }()

	select {
	case <-r.started:
		t.Fatal("started while Thing is not served")
	case <-time.After(200 * time.Millisecond):
	}
	f.SetKinds([]schema.GroupVersionKind{configMapGVK}) // a swap dropped the Thing watch
	select {
	case <-r.started:
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5s after the kind it waited for was dropped")
	}
	// And a kind that is not served, added back, stops it again.
	f.SetKinds([]schema.GroupVersionKind{configMapGVK, thingGVK})
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5s after a kind that is not served was added")
	}
}

// failsWhenStopped is a runnable whose Start, once cancelled, returns what a permission review
// cut short returns: an error wrapping the cancellation.
type failsWhenStopped struct{ started chan struct{} }

func (r *failsWhenStopped) Start(ctx context.Context) error {
	r.started <- struct{}{}
	<-ctx.Done()
	return fmt.Errorf("asking the API server what system:serviceaccount:team-a:probe may do: %w", ctx.Err())
}

// A runnable stopped by its context returns nothing to the manager, whatever the wrapped one
// said on its way out: a plugin's review cut short by its Leases moving stopped the host.
func TestStoppedRunnableIsNotAFailure(t *testing.T) {
	w := offlineWatcher(t)
	r := &failsWhenStopped{started: make(chan struct{}, 1)}
	f := Follow(w, []schema.GroupVersionKind{configMapGVK}, r, logr.Discard(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Start(ctx) }()
	select {
	case <-r.started:
	case <-time.After(5 * time.Second):
		t.Fatal("not started in 5s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start returned %v after its context was cancelled; want nil", err)
	}
}
