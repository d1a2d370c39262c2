package crdwatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

var crdKey = cache.Key{GroupVersionKind: apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")}

// Watcher knows which kinds the API server serves. It is a manager Runnable that runs on every
// replica.
type Watcher struct {
	cache *cache.Cache
	log   logr.Logger

	mu      sync.Mutex
	crds    map[string][]schema.GroupVersionKind // CRD name -> the kinds it serves now (established)
	crdGKs  map[schema.GroupKind]bool            // kinds any CRD has defined in this process's life
	subs    map[int]chan struct{}
	nextSub int
	synced  chan struct{}
}

// NewWatcher returns a Watcher reading CRDs through c.
func NewWatcher(c *cache.Cache, log logr.Logger) *Watcher {
	return &Watcher{cache: c, log: log, crds: map[string][]schema.GroupVersionKind{},
		crdGKs: map[schema.GroupKind]bool{}, subs: map[int]chan struct{}{}, synced: make(chan struct{})}
}

// NeedLeaderElection is false: every replica follows CRDs.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Name names it in the manager's messages.
func (w *Watcher) Name() string { return "the CustomResourceDefinition watch" }

// Start watches CRDs until ctx is done.
func (w *Watcher) Start(ctx context.Context) error {
	inf, err := w.cache.Acquire(crdKey)
	if err != nil {
		return err
	}
	defer inf.Release()
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.set(obj) },
		UpdateFunc: func(_, obj any) { w.set(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(*object.Object); ok {
				w.update(o.Name, nil)
			}
		},
	})
	if err != nil {
		return err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	if err := inf.WaitForSync(ctx, reg); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	close(w.synced)
	<-ctx.Done()
	return nil
}

func (w *Watcher) set(obj any) {
	o, ok := obj.(*object.Object)
	if !ok {
		return
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := json.Unmarshal(o.Raw, &crd); err != nil {
		w.log.Error(err, "reading a CRD", "crd", o.Name)
		return
	}
	var served []schema.GroupVersionKind
	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	w.mu.Lock()
	w.crdGKs[gk] = true
	w.mu.Unlock()
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if established && crd.DeletionTimestamp == nil {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served = append(served, gk.WithVersion(v.Name))
			}
		}
	}
	w.update(crd.Name, served)
}

// update records what a CRD serves (nil: nothing) and tells subscribers if that changed.
func (w *Watcher) update(name string, served []schema.GroupVersionKind) {
	w.mu.Lock()
	old := w.crds[name]
	if equal(old, served) {
		w.mu.Unlock()
		return
	}
	if served == nil {
		delete(w.crds, name)
	} else {
		w.crds[name] = served
	}
	subs := make([]chan struct{}, 0, len(w.subs))
	for _, ch := range w.subs {
		subs = append(subs, ch)
	}
	w.mu.Unlock()
	// Kinds came or went: the mapper must not answer from what it knew before.
	if r, ok := w.cache.RESTMapper().(interface{ Reset() }); ok {
		r.Reset()
	}
	w.log.Info("served kinds changed", "crd", name, "served", kinds.GVKs(served))
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func equal(a, b []schema.GroupVersionKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Synced is closed once the Watcher has seen every CRD that existed when it started.
func (w *Watcher) Synced() <-chan struct{} { return w.synced }

// Served reports whether the API server serves gvk now. A kind a CRD has defined is served
// while an established CRD serves its version; any other kind is served if discovery knows it
// (the built-in kinds).
func (w *Watcher) Served(gvk schema.GroupVersionKind) bool {
	w.mu.Lock()
	defined := w.crdGKs[gvk.GroupKind()]
	for _, kinds := range w.crds {
		for _, k := range kinds {
			if k == gvk {
				w.mu.Unlock()
				return true
			}
		}
	}
	w.mu.Unlock()
	if defined {
		return false
	}
	_, err := w.cache.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil || !meta.IsNoMatchError(err)
}

// NotServed lists, one line each, the kinds of gvks the API server does not serve now, each
// with what would serve it or what was most likely meant:
//
//	Widgt.v1.example.com (no CRD serves it: did you mean Widget, which example.com serves?)
//	Widget.v2.example.com (example.com serves Widget at v1 only)
//	Gadget.v1.example.com (install the CRD that serves it, gadgets.example.com)
//	ConfigMaps.v1 (v1 has no kind ConfigMaps: did you mean ConfigMap?)
func (w *Watcher) NotServed(gvks []schema.GroupVersionKind) []string {
	var out []string
	for _, k := range gvks {
		if !w.Served(k) {
			out = append(out, w.notServed(k))
		}
	}
	return out
}

// notServed says what would serve gvk, which is not served, or what was most likely meant: a
// kind of the same group that a CRD serves.
func (w *Watcher) notServed(gvk schema.GroupVersionKind) string {
	if kinds.BuiltInGroup(gvk.Group) {
		if k := kinds.Lookup(gvk); !k.BuiltIn {
			return kinds.GVK(gvk) + " (" + kinds.NotBuiltIn(gvk) + ")"
		}
		return kinds.GVK(gvk) + " (an API this API server does not enable)"
	}
	var versions, names []string // of gvk's kind; of the group's kinds
	w.mu.Lock()
	for _, served := range w.crds {
		for _, k := range served {
			if k.Group != gvk.Group {
				continue
			}
			if k.Kind == gvk.Kind {
				versions = append(versions, k.Version)
			}
			names = append(names, k.Kind)
		}
	}
	w.mu.Unlock()
	if len(versions) > 0 {
		slices.Sort(versions)
		return fmt.Sprintf("%s (%s serves %s at %s only)", kinds.GVK(gvk), gvk.Group, gvk.Kind, strings.Join(slices.Compact(versions), ", "))
	}
	if m := kinds.Closest(gvk.Kind, names); m != "" {
		return fmt.Sprintf("%s (no CRD serves it: did you mean %s, which %s serves?)", kinds.GVK(gvk), m, gvk.Group)
	}
	return kinds.GVK(gvk) + " (install the CRD that serves it, " + kinds.Lookup(gvk).Resource + "." + gvk.Group + ")"
}

// Subscribe returns a channel that receives after each change of the served kinds, and a
// function to stop.
func (w *Watcher) Subscribe() (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextSub
	w.nextSub++
	ch := make(chan struct{}, 1)
	w.subs[id] = ch
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs, id)
	}
}
