package source

import (
	"context"
	"errors"
	"fmt"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/predicate"
)

// Source delivers events to a controller's queue. A source can be started again after Stop,
// which is what lets a controller stop and start again.
type Source interface {
	// Start registers the source; events reach q from then until Stop. ctx is handed to the
	// handler and predicates with each event.
	Start(ctx context.Context, q handler.Queue) error
	// WaitForSync waits until every object that existed at Start has been delivered.
	WaitForSync(ctx context.Context) error
	// Stop unregisters the source and lets go of what it holds. It returns once no more events
	// will be delivered.
	Stop() error
	fmt.Stringer
}

// Kind watches key through c's shared informers.
func Kind(c *cache.Cache, key cache.Key, h handler.EventHandler, preds ...predicate.Predicate) Source {
	acquire := func() (*cache.Informer, func(), error) {
		inf, err := c.Acquire(key)
		if err != nil {
			return nil, nil, err
		}
		return inf, inf.Release, nil
	}
	return &kind{acquire: acquire, key: key, h: h, preds: preds}
}

// Informers lends a source the informer of a key, and takes it back: a holder of the cache's
// informers that counts who uses them, as a plugin's informer set does. Every Acquire is paired
// with one Release of the same key.
type Informers interface {
	Acquire(cache.Key) (*cache.Informer, error)
	Release(cache.Key)
}

// KindFrom watches key through the informer infs lends it, from Start to Stop.
func KindFrom(infs Informers, key cache.Key, h handler.EventHandler, preds ...predicate.Predicate) Source {
	acquire := func() (*cache.Informer, func(), error) {
		inf, err := infs.Acquire(key)
		if err != nil {
			return nil, nil, err
		}
		return inf, func() { infs.Release(key) }, nil
	}
	return &kind{acquire: acquire, key: key, h: h, preds: preds}
}

type kind struct {
	acquire func() (inf *cache.Informer, release func(), err error)
	key     cache.Key
	h       handler.EventHandler
	preds   []predicate.Predicate

	mu      sync.Mutex
	inf     *cache.Informer
	release func() // gives inf back
	reg     *registration
}

func (k *kind) String() string { return "kind source: " + k.key.String() }

func (k *kind) Start(ctx context.Context, q handler.Queue) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inf != nil {
		return fmt.Errorf("%s: already started", k)
	}
	inf, release, err := k.acquire()
	if err != nil {
		return err
	}
	reg, err := register(ctx, inf, q, k.h, k.preds)
	if err != nil {
		release()
		return err
	}
	k.inf, k.release, k.reg = inf, release, reg
	return nil
}

func (k *kind) WaitForSync(ctx context.Context) error {
	k.mu.Lock()
	inf, reg := k.inf, k.reg
	k.mu.Unlock()
	if inf == nil {
		return fmt.Errorf("%s: not started", k)
	}
	return inf.WaitForSync(ctx, reg.reg)
}

func (k *kind) Stop() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inf == nil {
		return nil
	}
	k.reg.stop()
	err := k.inf.RemoveEventHandler(k.reg.reg)
	k.release()
	k.inf, k.release, k.reg = nil, nil, nil
	return err
}

// Informer watches an informer the caller owns and runs; Stop only unregisters.
func Informer(inf toolscache.SharedIndexInformer, h handler.EventHandler, preds ...predicate.Predicate) Source {
	return &informerSource{inf: inf, h: h, preds: preds}
}

type informerSource struct {
	inf   toolscache.SharedIndexInformer
	h     handler.EventHandler
	preds []predicate.Predicate

	mu  sync.Mutex
	reg *registration
}

func (s *informerSource) String() string { return "informer source" }

func (s *informerSource) Start(ctx context.Context, q handler.Queue) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg != nil {
		return errors.New("informer source: already started")
	}
	reg, err := register(ctx, s.inf, q, s.h, s.preds)
	if err != nil {
		return err
	}
	s.reg = reg
	return nil
}

func (s *informerSource) WaitForSync(ctx context.Context) error {
	s.mu.Lock()
	reg := s.reg
	s.mu.Unlock()
	if reg == nil {
		return errors.New("informer source: not started")
	}
	if !toolscache.WaitFor(ctx, "", s.inf.HasSyncedChecker(), reg.reg.HasSyncedChecker()) {
		return fmt.Errorf("informer source: stopped waiting for sync: %w", context.Cause(ctx))
	}
	return nil
}

func (s *informerSource) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg == nil {
		return nil
	}
	s.reg.stop()
	err := s.inf.RemoveEventHandler(s.reg.reg)
	s.reg = nil
	return err
}

// informer is what register needs of an informer or a cache handle.
type informer interface {
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

// registration adapts informer callbacks to predicates and a handler.
type registration struct {
	ctx   context.Context
	q     handler.Queue
	h     handler.EventHandler
	preds []predicate.Predicate
	reg   toolscache.ResourceEventHandlerRegistration

	// An event is handled under mu read-locked; stop write-locks it. client-go's
	// RemoveEventHandler does not wait for an event being handled, so without it an event could
	// reach the queue after Stop returned.
	mu      sync.RWMutex
	stopped bool
}

// stop ends the delivery of events: once it returns, none reaches the queue. It must not be
// called from the handler or a predicate.
func (r *registration) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
}

// handling reports whether an event may be handled, and if so holds off stop until done.
func (r *registration) handling() bool {
	r.mu.RLock()
	if r.stopped {
		r.mu.RUnlock()
		return false
	}
	return true
}

func register(ctx context.Context, inf informer, q handler.Queue, h handler.EventHandler, preds []predicate.Predicate) (*registration, error) {
	r := &registration{ctx: ctx, q: q, h: h, preds: preds}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    r.onAdd,
		UpdateFunc: r.onUpdate,
		DeleteFunc: r.onDelete,
	})
	if err != nil {
		return nil, err
	}
	r.reg = reg
	return r, nil
}

func (r *registration) onAdd(obj any) {
	if !r.handling() {
		return
	}
	defer r.mu.RUnlock()
	o, ok := obj.(event.Object)
	if !ok {
		return
	}
	e := event.CreateEvent{Object: o}
	for _, p := range r.preds {
		if !p.Create(e) {
			return
		}
	}
	r.h.Create(r.ctx, e, r.q)
}

func (r *registration) onUpdate(oldObj, newObj any) {
	if !r.handling() {
		return
	}
	defer r.mu.RUnlock()
	o, ok1 := oldObj.(event.Object)
	n, ok2 := newObj.(event.Object)
	if !ok1 || !ok2 {
		return
	}
	e := event.UpdateEvent{ObjectOld: o, ObjectNew: n}
	for _, p := range r.preds {
		if !p.Update(e) {
			return
		}
	}
	r.h.Update(r.ctx, e, r.q)
}

func (r *registration) onDelete(obj any) {
	if !r.handling() {
		return
	}
	defer r.mu.RUnlock()
	e := event.DeleteEvent{}
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		e.DeleteStateUnknown = true
		obj = tomb.Obj
	}
	o, ok := obj.(event.Object)
	if !ok {
		return
	}
	e.Object = o
	for _, p := range r.preds {
		if !p.Delete(e) {
			return
		}
	}
	r.h.Delete(r.ctx, e, r.q)
}
