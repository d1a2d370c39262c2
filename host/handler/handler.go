package handler

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/reconcile"
)

// Queue is a controller's queue as handlers see it.
type Queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// EventHandler enqueues Requests in response to events. Handlers add with Queue.Add: the rate
// limiter is for retries, not for fresh events.
type EventHandler interface {
	Create(context.Context, event.CreateEvent, Queue)
	Update(context.Context, event.UpdateEvent, Queue)
	Delete(context.Context, event.DeleteEvent, Queue)
	Generic(context.Context, event.GenericEvent, Queue)
}

// MapFunc maps an object to the Requests it should trigger.
type MapFunc func(context.Context, event.Object) []reconcile.Request

// EnqueueRequestForObject enqueues the key of the object the event is about (For).
func EnqueueRequestForObject() EventHandler {
	return EnqueueRequestsFromMapFunc(func(_ context.Context, o event.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
	})
}

// EnqueueRequestsFromMapFunc enqueues what fn returns for the object (Watches). On update it maps
// both the old and the new object, so a key that stops matching is reconciled once more.
func EnqueueRequestsFromMapFunc(fn MapFunc) EventHandler {
	return &mapHandler{fn: fn}
}

type mapHandler struct{ fn MapFunc }

func (h *mapHandler) Create(ctx context.Context, e event.CreateEvent, q Queue) {
	h.add(ctx, q, e.Object)
}

func (h *mapHandler) Update(ctx context.Context, e event.UpdateEvent, q Queue) {
	h.add(ctx, q, e.ObjectOld, e.ObjectNew)
}

func (h *mapHandler) Delete(ctx context.Context, e event.DeleteEvent, q Queue) {
	h.add(ctx, q, e.Object)
}

func (h *mapHandler) Generic(ctx context.Context, e event.GenericEvent, q Queue) {
	h.add(ctx, q, e.Object)
}

func (h *mapHandler) add(ctx context.Context, q Queue, objs ...event.Object) {
	var seen map[reconcile.Request]struct{}
	if len(objs) > 1 {
		seen = make(map[reconcile.Request]struct{})
	}
	for _, o := range objs {
		if o == nil {
			continue
		}
		for _, req := range h.fn(ctx, o) {
			if seen != nil {
				if _, dup := seen[req]; dup {
					continue
				}
				seen[req] = struct{}{}
			}
			q.Add(req)
		}
	}
}

// OwnerOption configures EnqueueRequestForOwner.
type OwnerOption func(*ownerHandler)

// OnlyControllerOwner limits the handler to the owner reference marked controller: true, as
// controller-runtime's Owns does by default.
func OnlyControllerOwner() OwnerOption {
	return func(h *ownerHandler) { h.onlyController = true }
}

// EnqueueRequestForOwner enqueues the keys of the object's owners of the given group and kind
// (Owns). mapper tells whether an owner kind is namespaced: a namespaced owner lives in the
// object's namespace, a cluster-scoped one in none.
func EnqueueRequestForOwner(mapper meta.RESTMapper, owner schema.GroupKind, opts ...OwnerOption) EventHandler {
	h := &ownerHandler{mapper: mapper, owner: owner}
	for _, o := range opts {
		o(h)
	}
	return EnqueueRequestsFromMapFunc(h.requests)
}

type ownerHandler struct {
	mapper         meta.RESTMapper
	owner          schema.GroupKind
	onlyController bool
}

func (h *ownerHandler) requests(_ context.Context, o event.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, ref := range o.GetOwnerReferences() {
		if h.onlyController && (ref.Controller == nil || !*ref.Controller) {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || ref.Kind != h.owner.Kind || gv.Group != h.owner.Group {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{
			Namespace: h.ownerNamespace(o, gv.Version),
			Name:      ref.Name,
		}})
	}
	return reqs
}

// ownerNamespace is where an owner of o lives. A cluster-scoped object can only have
// cluster-scoped owners; a namespaced one has owners in its namespace unless the owner kind is
// cluster-scoped. If the mapper cannot tell (the owner's CRD is gone), the object's namespace is
// the best guess: owner references across namespaces are not allowed.
func (h *ownerHandler) ownerNamespace(o event.Object, version string) string {
	ns := o.GetNamespace()
	if ns == "" || h.mapper == nil {
		return ns
	}
	m, err := h.mapper.RESTMapping(h.owner, version)
	if err == nil && m.Scope.Name() == meta.RESTScopeNameRoot {
		return ""
	}
	return ns
}

// Funcs is an EventHandler built from functions; a nil function ignores its events.
type Funcs struct {
	CreateFunc  func(context.Context, event.CreateEvent, Queue)
	UpdateFunc  func(context.Context, event.UpdateEvent, Queue)
	DeleteFunc  func(context.Context, event.DeleteEvent, Queue)
	GenericFunc func(context.Context, event.GenericEvent, Queue)
}

var _ EventHandler = Funcs{}

// Create calls CreateFunc if set.
func (h Funcs) Create(ctx context.Context, e event.CreateEvent, q Queue) {
	if h.CreateFunc != nil {
		h.CreateFunc(ctx, e, q)
	}
}

// Update calls UpdateFunc if set.
func (h Funcs) Update(ctx context.Context, e event.UpdateEvent, q Queue) {
	if h.UpdateFunc != nil {
		h.UpdateFunc(ctx, e, q)
	}
}

// Delete calls DeleteFunc if set.
func (h Funcs) Delete(ctx context.Context, e event.DeleteEvent, q Queue) {
	if h.DeleteFunc != nil {
		h.DeleteFunc(ctx, e, q)
	}
}

// Generic calls GenericFunc if set.
func (h Funcs) Generic(ctx context.Context, e event.GenericEvent, q Queue) {
	if h.GenericFunc != nil {
		h.GenericFunc(ctx, e, q)
	}
}

// WithRequestFilter wraps h so that it adds to the queue only the requests keep lets through.
func WithRequestFilter(h EventHandler, keep func(context.Context, reconcile.Request) bool) EventHandler {
	return &filtered{h: h, keep: keep}
}

type filtered struct {
	h    EventHandler
	keep func(context.Context, reconcile.Request) bool
}

func (f *filtered) Create(ctx context.Context, e event.CreateEvent, q Queue) {
	f.h.Create(ctx, e, filterQueue{Queue: q, ctx: ctx, keep: f.keep})
}

func (f *filtered) Update(ctx context.Context, e event.UpdateEvent, q Queue) {
	f.h.Update(ctx, e, filterQueue{Queue: q, ctx: ctx, keep: f.keep})
}

func (f *filtered) Delete(ctx context.Context, e event.DeleteEvent, q Queue) {
	f.h.Delete(ctx, e, filterQueue{Queue: q, ctx: ctx, keep: f.keep})
}

func (f *filtered) Generic(ctx context.Context, e event.GenericEvent, q Queue) {
	f.h.Generic(ctx, e, filterQueue{Queue: q, ctx: ctx, keep: f.keep})
}

// filterQueue drops the requests keep does not let through.
type filterQueue struct {
	Queue
	ctx  context.Context
	keep func(context.Context, reconcile.Request) bool
}

func (q filterQueue) Add(r reconcile.Request) {
	if q.keep(q.ctx, r) {
		q.Queue.Add(r)
	}
}

func (q filterQueue) AddRateLimited(r reconcile.Request) {
	if q.keep(q.ctx, r) {
		q.Queue.AddRateLimited(r)
	}
}

func (q filterQueue) AddAfter(r reconcile.Request, d time.Duration) {
	if q.keep(q.ctx, r) {
		q.Queue.AddAfter(r, d)
	}
}
