package watches

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/source"
)

// Plugin is what of a plugin its sources depend on.
type Plugin struct {
	// Informers lends the sources their informers; they take them only when started.
	Informers source.Informers
	// Mapper says which kinds are cluster-scoped: those are watched whole, whatever Namespaces.
	Mapper meta.RESTMapper
	// Namespaces are the plugin's (none: all): a namespaced kind is watched through one
	// informer per namespace, and events of other namespaces are dropped.
	Namespaces []string
	// For is the kind the plugin reconciles, whose controller owner an owned object names.
	For schema.GroupVersionKind
	// Sharding is which shards of its objects the plugin runs here.
	Sharding informers.Sharding
	// ShardFilter wraps the handler of an owned or watched kind, whose object may map to a For
	// object of another shard. Nil: none.
	ShardFilter func(handler.EventHandler) handler.EventHandler
	// Map maps an object of a watch to For requests, by the watch's map mode (abi.MapSameName,
	// abi.MapNamespace, abi.MapFunc).
	Map func(w abi.Watch) handler.MapFunc
}

// Source is one source of the controller and the informer it reads.
type Source struct {
	Key cache.Key
	Src source.Source
}

// Sources are a manifest's sources, keyed by what each watches and how, so that two manifests
// can be compared source by source: the same key is the same source.
type Sources map[string]Source

// Keys lists the distinct informers the sources read, in a stable order.
func (s Sources) Keys() []cache.Key {
	var keys []cache.Key
	for _, w := range s {
		if !slices.Contains(keys, w.Key) {
			keys = append(keys, w.Key)
		}
	}
	slices.SortFunc(keys, func(a, b cache.Key) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// OwnsMetadataOnly is false: an owned kind is watched through the full informer that the
// plugin's reads of it use, as controller-runtime's Owns does. Through a metadata-only informer
// of its own, an owned object's event could enqueue its owner before the full informer's store
// had the change, and the reconcile read the child as it was before (a CronJob skipped a run
// because its Job had not yet failed in its cache).
const OwnsMetadataOnly = false

// Sources builds the sources m asks for. An error names the watch (for, owns[i], watches[i]).
func (pl Plugin) Sources(m *abi.Manifest) (Sources, error) {
	out := Sources{}
	add := func(role string, w abi.Watch, metadataOnly bool, h handler.EventHandler) error {
		gvk, err := ParseGVK(w)
		if err != nil {
			return err
		}
		preds, err := predicate.FromManifest(w.Predicates)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk.Kind, err)
		}
		if len(pl.Namespaces) > 0 { // cluster-scoped objects are not limited by namespaces
			preds = append(preds, predicate.NewPredicateFuncs(func(o event.Object) bool {
				return o.GetNamespace() == "" || slices.Contains(pl.Namespaces, o.GetNamespace())
			}))
		}
		if role != "for" && pl.ShardFilter != nil {
			h = pl.ShardFilter(h) // a watched object may map to a For object of any shard
		}
		// A plugin limited to namespaces watches through informers of those namespaces only.
		for _, key := range pl.Keys(gvk, metadataOnly) {
			id, _ := json.Marshal(struct {
				Role      string
				Watch     abi.Watch
				Namespace string `json:",omitempty"`
				Shard     string `json:",omitempty"`
			}{role, w, key.Namespace, key.Shard.String()})
			out[string(id)] = Source{Key: key, Src: source.KindFrom(pl.Informers, key, h, preds...)}
		}
		return nil
	}
	if err := add("for", m.For, false, handler.EnqueueRequestForObject()); err != nil {
		return nil, fmt.Errorf("for: %w", err)
	}
	for i, w := range m.Owns {
		owns := handler.EnqueueRequestForOwner(pl.Mapper, pl.For.GroupKind(), handler.OnlyControllerOwner())
		if err := add("owns", w, OwnsMetadataOnly, owns); err != nil {
			return nil, fmt.Errorf("owns[%d]: %w", i, err)
		}
	}
	for i, w := range m.Watches {
		if err := add("watches", w, false, handler.EnqueueRequestsFromMapFunc(pl.Map(w))); err != nil {
			return nil, fmt.Errorf("watches[%d]: %w", i, err)
		}
	}
	return out, nil
}

// Keys are the informers the plugin watches gvk through: one per namespace of the plugin, or
// one for all (no namespaces, or a kind the API server says is cluster-scoped); those of the
// shards it runs, for a kind it splits.
func (pl Plugin) Keys(gvk schema.GroupVersionKind, metadataOnly bool) []cache.Key {
	if m, err := pl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil && m.Scope.Name() != meta.RESTScopeNameNamespace {
		return informers.Keys(gvk, metadataOnly, nil, pl.Sharding.Shards(gvk, false))
	}
	return informers.Keys(gvk, metadataOnly, pl.Namespaces, pl.Sharding.Shards(gvk, true))
}

// ParseGVK is the kind a watch names.
func ParseGVK(w abi.Watch) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(w.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", w.APIVersion, err)
	}
	return gv.WithKind(w.Kind), nil
}
