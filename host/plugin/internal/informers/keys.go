package informers

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/shard"
)

// Sharding is how a sharded plugin's objects are split, and which shards this replica runs.
type Sharding struct {
	// Field is shard.ByNamespace (every namespaced kind is split by namespace) or shard.ByUID
	// (only For is split, by uid). Count 0 or 1: not sharded.
	Field string
	Count int
	// Held are the shards this replica runs.
	Held []int
	// For is the plugin's For kind.
	For schema.GroupVersionKind
}

// Shards are the shards of gvk this replica runs: none if gvk is not split.
func (s Sharding) Shards(gvk schema.GroupVersionKind, namespaced bool) []shard.Shard {
	if !s.Splits(gvk, namespaced) {
		return nil
	}
	out := make([]shard.Shard, 0, len(s.Held))
	for _, i := range s.Held {
		out = append(out, shard.Of(s.Field, i, s.Count))
	}
	return out
}

// Splits reports whether s splits gvk: every namespaced kind split by namespace, the For kind
// alone split by uid.
func (s Sharding) Splits(gvk schema.GroupVersionKind, namespaced bool) bool {
	switch {
	case s.Count <= 1:
		return false
	case s.Field == shard.ByNamespace:
		return namespaced
	}
	return gvk == s.For
}

// String is "0/3, 2/3 (by namespace)", or "" if not sharded.
func (s Sharding) String() string {
	if s.Count <= 1 {
		return ""
	}
	held := make([]string, len(s.Held))
	for i, h := range s.Held {
		held[i] = shard.Of(s.Field, h, s.Count).String()
	}
	return fmt.Sprintf("%s (by %s)", strings.Join(held, ", "), shard.Of(s.Field, 0, s.Count).By())
}

// Owns reports whether a request of the For kind falls in a shard this replica runs, for a
// plugin split by namespace. (Split by uid, only the object tells.)
func (s Sharding) Owns(namespace string) bool {
	return s.Count <= 1 || s.Field != shard.ByNamespace || slices.Contains(s.Held, shard.IndexOf(namespace, s.Count))
}

// Keys are the informers the plugin's reads and watches of gvk use: one per namespace of the
// plugin, or one for all (for a cluster-scoped kind the cache makes them one); each of them
// once per shard, for a kind split into shards.
func Keys(gvk schema.GroupVersionKind, metadataOnly bool, namespaces []string, shards []shard.Shard) []cache.Key {
	var keys []cache.Key
	if len(namespaces) == 0 {
		keys = []cache.Key{{GroupVersionKind: gvk, MetadataOnly: metadataOnly}}
	} else {
		keys = make([]cache.Key, 0, len(namespaces))
		for _, ns := range namespaces {
			keys = append(keys, cache.Key{GroupVersionKind: gvk, MetadataOnly: metadataOnly, Namespace: ns})
		}
	}
	if len(shards) == 0 {
		return keys
	}
	out := make([]cache.Key, 0, len(keys)*len(shards))
	for _, k := range keys {
		for _, s := range shards {
			k.Shard = s
			out = append(out, k)
		}
	}
	return out
}
