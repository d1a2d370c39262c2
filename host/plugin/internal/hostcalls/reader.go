package hostcalls

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/shard"
)

// Reader reads a plugin's objects through its informer set, holding each informer for reads
// from its first read until the plugin's controller stops (informers.Read). A plugin limited to
// namespaces reads through informers of those namespaces only: the host never lists a kind
// across the cluster for it. A sharded plugin reads through the informers of shards.
type Reader struct {
	informers  *informers.Set
	mapper     meta.RESTMapper
	namespaces []string                  // the plugin's; none: all
	sharding   func() informers.Sharding // the shards the plugin runs now
}

// NewReader returns a Reader of set's informers, for a plugin limited to namespaces (none:
// all); mapper tells namespaced kinds from others, and sharding (nil: none) says which shards
// the plugin runs, asked at each read. The shards change only while the plugin's controller is
// stopped, after its reads' informers are let go of.
func NewReader(set *informers.Set, mapper meta.RESTMapper, namespaces []string, sharding func() informers.Sharding) *Reader {
	if sharding == nil {
		sharding = func() informers.Sharding { return informers.Sharding{} }
	}
	return &Reader{informers: set, mapper: mapper, namespaces: namespaces, sharding: sharding}
}

// informer returns the synced informer of key, held for reads from now until the controller
// stops. While the API server refuses the host the informer's list, it returns a
// *cache.RefusedError at once: waiting would only hold the reconcile until its timeout.
func (r *Reader) informer(ctx context.Context, key cache.Key) (*cache.Informer, error) {
	inf, err := r.informers.Ensure(informers.Read, key)
	if err != nil {
		return nil, err
	}
	if err := inf.WaitForSyncUnlessRefused(ctx); err != nil {
		return nil, err
	}
	return inf, nil
}

// namespaced reports whether the API server says gvk is namespaced (true if it cannot tell).
func (r *Reader) namespaced(gvk schema.GroupVersionKind) bool {
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err != nil || m.Scope.Name() == meta.RESTScopeNameNamespace
}

// Get reads one object of gvk. The caller has checked that namespace is the plugin's. Of a
// kind split by namespace it reads the namespace's shard, run here or not; of the For kind
// split by uid, the shards this replica runs: an object of another shard is not found.
func (r *Reader) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	key := cache.Key{GroupVersionKind: gvk}
	if len(r.namespaces) > 0 {
		key.Namespace = namespace
	}
	s := r.sharding()
	if s.Count <= 1 || !s.Splits(gvk, r.namespaced(gvk)) { // not sharded: no mapper lookup
		inf, err := r.informer(ctx, key)
		if err != nil {
			return nil, err
		}
		return inf.Get(namespace, name)
	}
	if s.Field == shard.ByNamespace {
		key.Shard = shard.Of(s.Field, shard.IndexOf(namespace, s.Count), s.Count)
		inf, err := r.informer(ctx, key)
		if err != nil {
			return nil, err
		}
		return inf.Get(namespace, name)
	}
	var last error = apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, name)
	for _, i := range s.Held {
		key.Shard = shard.Of(s.Field, i, s.Count)
		inf, err := r.informer(ctx, key)
		if err != nil {
			return nil, err
		}
		obj, err := inf.Get(namespace, name)
		if err == nil {
			return obj, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		last = err
	}
	return nil, last
}

// List lists the objects of gvk in namespace ("" for every namespace of the plugin) that sel
// selects (nil: all). Of a kind split by namespace, a list of every namespace reads every shard;
// of the For kind split by uid, the shards this replica runs.
func (r *Reader) List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, sel labels.Selector) ([]runtime.Object, error) {
	s := r.sharding()
	var shards []shard.Shard
	if s.Count > 1 && s.Splits(gvk, r.namespaced(gvk)) {
		switch {
		case s.Field == shard.ByUID:
			shards = s.Shards(gvk, true)
		case namespace != "":
			shards = []shard.Shard{shard.Of(s.Field, shard.IndexOf(namespace, s.Count), s.Count)}
		default:
			for i := range s.Count {
				shards = append(shards, shard.Of(s.Field, i, s.Count))
			}
		}
	}
	keys := informers.Keys(gvk, false, r.namespaces, shards)
	if namespace != "" && len(r.namespaces) > 0 {
		keys = informers.Keys(gvk, false, []string{namespace}, shards)
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
		if inf.Key().Namespace == "" && len(shards) == 0 {
			break // an informer of the whole cluster (a cluster-scoped kind): listed once
		}
	}
	return out, nil
}
