package guest

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/host/cache"
)

// Reader holds the informers a plugin reads from, acquired on first read and released when the
// plugin's controller stops. A plugin limited to namespaces reads through informers of those
// namespaces only: the host never lists a kind across the cluster for it.
type Reader struct {
	cache      *cache.Cache
	namespaces []string // the plugin's; none: all
	mu         sync.Mutex
	informers  map[cache.Key]*cache.Informer // by the key asked for
}

// NewReader returns a Reader of c's informers, for a plugin limited to namespaces (none: all).
func NewReader(c *cache.Cache, namespaces []string) *Reader {
	return &Reader{cache: c, namespaces: namespaces, informers: map[cache.Key]*cache.Informer{}}
}

// Keys are the informers the plugin's reads and watches of gvk use: one per namespace of the
// plugin, or one for all. (For a cluster-scoped kind the cache makes them one.)
func Keys(gvk schema.GroupVersionKind, metadataOnly bool, namespaces []string) []cache.Key {
	if len(namespaces) == 0 {
		return []cache.Key{{GroupVersionKind: gvk, MetadataOnly: metadataOnly}}
	}
	keys := make([]cache.Key, 0, len(namespaces))
	for _, ns := range namespaces {
		keys = append(keys, cache.Key{GroupVersionKind: gvk, MetadataOnly: metadataOnly, Namespace: ns})
	}
	return keys
}

// informer returns the synced informer of key, acquiring it on first use.
func (r *Reader) informer(ctx context.Context, key cache.Key) (*cache.Informer, error) {
	r.mu.Lock()
	inf, ok := r.informers[key]
	if !ok {
		var err error
		if inf, err = r.cache.Acquire(key); err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.informers[key] = inf
	}
	r.mu.Unlock()
	if !inf.HasSynced() {
		if err := inf.WaitForSync(ctx); err != nil {
			return nil, err
		}
	}
	return inf, nil
}

// Get reads one object of gvk. The caller has checked that namespace is the plugin's.
func (r *Reader) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	key := cache.Key{GroupVersionKind: gvk}
	if len(r.namespaces) > 0 {
		key.Namespace = namespace
	}
	inf, err := r.informer(ctx, key)
	if err != nil {
		return nil, err
	}
	return inf.Get(namespace, name)
}

// List lists the objects of gvk in namespace ("" for every namespace of the plugin) that sel
// selects (nil: all).
func (r *Reader) List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]runtime.Object, error) {
	keys := Keys(gvk, false, r.namespaces)
	if namespace != "" && len(r.namespaces) > 0 {
		keys = []cache.Key{{GroupVersionKind: gvk, Namespace: namespace}}
	}
	var out []runtime.Object
	for _, k := range keys {
		inf, err := r.informer(ctx, k)
		if err != nil {
			return nil, err
		}
		objs, err := inf.List(namespace, sel)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
		if inf.Key().Namespace == "" {
			break // an informer of the whole cluster (a cluster-scoped kind): listed once
		}
	}
	return out, nil
}

// ReleaseAll lets go of every informer acquired.
func (r *Reader) ReleaseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, inf := range r.informers {
		inf.Release()
		delete(r.informers, key)
	}
}
