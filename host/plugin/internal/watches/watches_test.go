package watches

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/shard"
)

var (
	configMap = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secret    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	namespace = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// plugin is a plugin of namespaces a and b that reconciles ConfigMaps, on a mapper that knows
// ConfigMaps and Secrets as namespaced and Namespaces as cluster-scoped.
func plugin() Plugin {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(configMap, meta.RESTScopeNamespace)
	m.Add(secret, meta.RESTScopeNamespace)
	m.Add(namespace, meta.RESTScopeRoot)
	return Plugin{
		Mapper:     m,
		Namespaces: []string{"a", "b"},
		For:        configMap,
		Map:        func(abi.Watch) handler.MapFunc { return nil },
	}
}

func manifest() *abi.Manifest {
	return &abi.Manifest{
		For:     abi.Watch{APIVersion: "v1", Kind: "ConfigMap", Predicates: []abi.Predicate{{Type: abi.PredicateGenerationChanged}}},
		Owns:    []abi.Watch{{APIVersion: "v1", Kind: "Secret"}},
		Watches: []abi.Watch{{APIVersion: "v1", Kind: "Namespace", Map: abi.MapSameName}},
	}
}

func key(gvk schema.GroupVersionKind, metadataOnly bool, ns string) cache.Key {
	return cache.Key{GroupVersionKind: gvk, MetadataOnly: metadataOnly, Namespace: ns}
}

// A namespaced kind is watched once per namespace of the plugin, an owned kind through
// metadata-only informers, a cluster-scoped kind once for all; each source reads one informer.
func TestAManifestsSourcesReadOneInformerPerNamespaceOfANamespacedKind(t *testing.T) {
	srcs, err := plugin().Sources(manifest())
	if err != nil {
		t.Fatal(err)
	}
	want := []cache.Key{
		key(configMap, false, "a"), key(configMap, false, "b"),
		key(namespace, false, ""),
		key(secret, false, "a"), key(secret, false, "b"),
	}
	slices.SortFunc(want, func(a, b cache.Key) int { return strings.Compare(a.String(), b.String()) })
	if got := srcs.Keys(); !slices.Equal(got, want) {
		t.Fatalf("keys\n got %v\nwant %v", got, want)
	}
	if len(srcs) != 5 {
		t.Fatalf("%d sources, want 5 (one per informer)", len(srcs))
	}

	all := plugin()
	all.Namespaces = nil
	srcs, err = all.Sources(manifest())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := srcs.Keys(), []cache.Key{key(configMap, false, ""), key(namespace, false, ""), key(secret, false, "")}; !slices.Equal(got, want) {
		t.Fatalf("a plugin of every namespace: keys %v, want %v", got, want)
	}
}

// Two manifests are compared source by source: the same watch gives the same source key, and
// a watch that changes (a predicate added) changes only its own sources' keys.
func TestSourcesAreKeyedByWhatTheyWatchAndHow(t *testing.T) {
	pl := plugin()
	before, err := pl.Sources(manifest())
	if err != nil {
		t.Fatal(err)
	}
	again, err := pl.Sources(manifest())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sortedIDs(before), sortedIDs(again)) {
		t.Fatalf("the same manifest gave other sources:\n%v\n%v", sortedIDs(before), sortedIDs(again))
	}
	m := manifest()
	m.Owns[0].Predicates = []abi.Predicate{{Type: abi.PredicateLabelChanged}}
	after, err := pl.Sources(m)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for id, s := range after {
		if _, ok := before[id]; ok {
			kept++
			if s.Key.GroupVersionKind == secret {
				t.Errorf("the owned kind's source %s kept its key though its predicates changed", id)
			}
		}
	}
	if kept != 3 {
		t.Errorf("%d sources kept their keys, want 3 (the For and Watches ones)", kept)
	}
}

func sortedIDs(s Sources) []string {
	ids := make([]string, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// A plugin split by namespace watches every namespaced kind through the shards it runs, and a
// cluster-scoped kind whole; split by uid, only its For kind is split.
func TestAShardedPluginWatchesTheShardsItRuns(t *testing.T) {
	pl := plugin()
	pl.Namespaces = nil
	pl.Sharding = informers.Sharding{Field: shard.ByNamespace, Count: 4, Held: []int{1, 3}, For: configMap}
	if got := pl.Keys(configMap, false); len(got) != 2 || got[0].Shard != shard.Of(shard.ByNamespace, 1, 4) || got[1].Shard != shard.Of(shard.ByNamespace, 3, 4) {
		t.Errorf("For split by namespace: %v, want shards 1/4 and 3/4", got)
	}
	if got := pl.Keys(secret, true); len(got) != 2 || !got[0].MetadataOnly {
		t.Errorf("an owned namespaced kind split by namespace: %v, want two metadata-only shards", got)
	}
	if got := pl.Keys(namespace, false); !slices.Equal(got, []cache.Key{key(namespace, false, "")}) {
		t.Errorf("a cluster-scoped kind: %v, want it whole", got)
	}
	pl.Sharding.Field = shard.ByUID
	if got := pl.Keys(configMap, false); len(got) != 2 || got[0].Shard != shard.Of(shard.ByUID, 1, 4) {
		t.Errorf("For split by uid: %v, want shards 1/4 and 3/4 by uid", got)
	}
	if got := pl.Keys(secret, true); !slices.Equal(got, []cache.Key{key(secret, true, "")}) {
		t.Errorf("an owned kind, For split by uid: %v, want it whole", got)
	}
}

// Every watch's error names it, as the manifest does.
func TestAWrongWatchIsNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*abi.Manifest)
		want string
	}{
		{"for", func(m *abi.Manifest) { m.For.APIVersion = "a/b/c" }, `for: apiVersion "a/b/c"`},
		{"owns", func(m *abi.Manifest) {
			m.Owns = append(m.Owns, abi.Watch{APIVersion: "v1", Kind: "Secret", Predicates: []abi.Predicate{{Type: "sometimes"}}})
		}, `owns[1]: Secret: unknown predicate type "sometimes"`},
		{"watches", func(m *abi.Manifest) {
			m.Watches[0].Predicates = []abi.Predicate{{Type: abi.PredicateNot, Predicates: []abi.Predicate{{Type: "never"}}}}
		}, `watches[0]: Namespace: unknown predicate type "never"`},
	} {
		m := manifest()
		tc.edit(m)
		if _, err := plugin().Sources(m); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error starting %q", tc.name, err, tc.want)
		}
	}
}
