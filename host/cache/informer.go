package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// Informer is one user's handle on a shared informer.
type Informer struct {
	cache    *Cache
	entry    *entry
	released sync.Once
}

// Key returns the informer's key.
func (i *Informer) Key() Key { return i.entry.key }

// Mapping returns the resource the informer lists and watches.
func (i *Informer) Mapping() *meta.RESTMapping { return i.entry.mapping }

// AddEventHandler registers h; events for objects already listed are delivered as adds.
func (i *Informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	reg, err := i.entry.informer.AddEventHandler(h)
	if err != nil {
		return nil, fmt.Errorf("cache: adding a handler to the %s informer: %w", i.entry.key, err)
	}
	return reg, nil
}

// RemoveEventHandler unregisters a handler added with AddEventHandler.
func (i *Informer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	return i.entry.informer.RemoveEventHandler(reg)
}

// errSyncTimeout is the cause of WaitForSync's own timeout, told from the caller's deadline.
var errSyncTimeout = errors.New("sync timeout")

// WaitForSync waits until the informer (and, if given, the handler registrations) have seen
// the first full list, for at most the cache's SyncTimeout.
func (i *Informer) WaitForSync(ctx context.Context, regs ...toolscache.ResourceEventHandlerRegistration) error {
	ctx, cancel := context.WithTimeoutCause(ctx, i.cache.opts.SyncTimeout, errSyncTimeout)
	defer cancel()
	// Channels, not client-go's WaitForCacheSync: it polls every 100 ms, and a plugin's start
	// waits on several informers in turn.
	synced := []toolscache.DoneChecker{i.entry.informer.HasSyncedChecker()}
	for _, r := range regs {
		synced = append(synced, r.HasSyncedChecker())
	}
	if toolscache.WaitFor(ctx, "", synced...) {
		return nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The caller's deadline may come first; it knows how long that was.
		after := ""
		if errors.Is(context.Cause(ctx), errSyncTimeout) {
			after = " after " + i.cache.opts.SyncTimeout.String()
		}
		if err := i.Refused(); err != nil {
			return fmt.Errorf("cache: timed out%s waiting for the %s informer to sync: %w", after, i.entry.key, err)
		}
		if i.entry.informer.HasSynced() { // listed: an event handler has not yet taken what it listed
			return fmt.Errorf("cache: timed out%s waiting for an event handler of the %s informer to take its first list: the informer has it, and the handler is slow (a plugin's map function that runs long for each object, say)",
				after, i.entry.key)
		}
		return fmt.Errorf("cache: timed out%s waiting for the %s informer (%s on %s) to sync: is the resource served and listable with these credentials?",
			after, i.entry.key, i.entry.mapping.Resource, i.cache.host)
	}
	return fmt.Errorf("cache: stopped waiting for the %s informer to sync: %w", i.entry.key, context.Cause(ctx))
}

// errRefused ends WaitForSyncUnlessRefused's wait.
var errRefused = errors.New("the list is refused")

// WaitForSyncUnlessRefused is WaitForSync, except that while the API server refuses the host's
// identity the informer's list (403 Forbidden, 401 Unauthorized), or as soon as it does, it
// returns a *RefusedError: waiting would not sync it before someone grants the list. It is
// for reads that should fail fast; it returns that error even for an informer that synced
// before the refusal, whose objects no longer follow the cluster.
func (i *Informer) WaitForSyncUnlessRefused(ctx context.Context) error {
	if err := i.Refused(); err != nil {
		return err
	}
	if i.HasSynced() {
		return nil
	}
	h := i.entry.health
	h.mu.Lock()
	refused := h.refused
	h.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-refused:
			cancel(errRefused)
		case <-ctx.Done():
		}
	}()
	err := i.WaitForSync(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errRefused) {
		if r := i.Refused(); r != nil {
			return r
		}
	}
	return err
}

// Refused returns a *RefusedError while the API server refuses the host's identity the
// informer's list, nil otherwise (a refused watch alone does not keep the informer from
// syncing; Failures reports it).
func (i *Informer) Refused() error {
	h := i.entry.health
	if !h.listRefused.Load() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing || !IsRefused(h.err) {
		return nil
	}
	return &RefusedError{Failure: h.failureLocked()}
}

// HasSynced reports whether the informer has seen its first full list.
func (i *Informer) HasSynced() bool { return i.entry.informer.HasSynced() }

// Get returns the object with this namespace and name from the informer's store: an
// *object.Object, or a *metav1.PartialObjectMetadata for a metadata-only informer. It is the
// cache's own: read it, never modify it.
func (i *Informer) Get(namespace, name string) (runtime.Object, error) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, exists, err := i.entry.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(i.entry.mapping.Resource.GroupResource(), name)
	}
	return obj.(runtime.Object), nil
}

// List returns the objects in namespace ("" for all) that match sel (nil for all). They are the
// cache's own, as Get's.
func (i *Informer) List(namespace string, sel labels.Selector) ([]runtime.Object, error) {
	idx := i.entry.informer.GetIndexer()
	var items []any
	if namespace == "" {
		items = idx.List()
	} else {
		var err error
		if items, err = idx.ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
			return nil, err
		}
	}
	out := make([]runtime.Object, 0, len(items))
	for _, it := range items {
		if sel != nil && !sel.Empty() {
			m, err := meta.Accessor(it)
			if err != nil || !sel.Matches(labels.Set(m.GetLabels())) {
				continue
			}
		}
		out = append(out, it.(runtime.Object))
	}
	return out, nil
}

// Release gives the handle back; the last release stops the shared informer. Release is
// idempotent.
func (i *Informer) Release() {
	i.released.Do(func() { i.cache.release(i.entry) })
}
