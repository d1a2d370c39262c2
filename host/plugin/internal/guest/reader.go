package guest

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/host/cache"
)

// Reader holds the informers a plugin reads from, acquired on first read and released when the
// plugin's controller stops.
type Reader struct {
	cache     *cache.Cache
	mu        sync.Mutex
	informers map[schema.GroupVersionKind]*cache.Informer
}

// NewReader returns a Reader of c's informers.
func NewReader(c *cache.Cache) *Reader {
	return &Reader{cache: c, informers: map[schema.GroupVersionKind]*cache.Informer{}}
}

// Informer returns the synced informer for gvk, acquiring it on first use.
func (r *Reader) Informer(ctx context.Context, gvk schema.GroupVersionKind) (*cache.Informer, error) {
	r.mu.Lock()
	inf, ok := r.informers[gvk]
	if !ok {
		var err error
		if inf, err = r.cache.Acquire(cache.Key{GroupVersionKind: gvk}); err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.informers[gvk] = inf
	}
	r.mu.Unlock()
	if !inf.HasSynced() {
		if err := inf.WaitForSync(ctx); err != nil {
			return nil, err
		}
	}
	return inf, nil
}

// ReleaseAll lets go of every informer acquired.
func (r *Reader) ReleaseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for gvk, inf := range r.informers {
		inf.Release()
		delete(r.informers, gvk)
	}
}
