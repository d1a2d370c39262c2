package shard

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/google/uuid"
)

// The host's shard of an object is the one whose selector, as apimachinery matches it (and the
// API server filters with), selects it: exactly one of the count shards, for every count.
func TestIndexOfAgreesWithSelectors(t *testing.T) {
	for _, count := range []int{2, 3, 5, 7, 16} {
		sels := make([]Shard, count)
		for i := range sels {
			sels[i] = Of(ByUID, i, count)
		}
		seen := make([]int, count)
		for range 2000 {
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: types.UID(uuid.NewString())}}
			want := IndexOf(string(obj.UID), count)
			matched := 0
			for i, s := range sels {
				ok, err := s.Selector().Matches(obj)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					matched++
					if i != want {
						t.Fatalf("%s: selector of shard %d matches, IndexOf says %d", obj.UID, i, want)
					}
				}
				if s.Matches(obj) != ok {
					t.Fatalf("%s: Matches and Selector().Matches disagree on shard %d", obj.UID, i)
				}
			}
			if matched != 1 {
				t.Fatalf("%s: %d of %d selectors match, want 1", obj.UID, matched, count)
			}
			seen[want]++
		}
		for i, n := range seen {
			if n < 2000/count/2 {
				t.Errorf("%d shards: shard %d got %d of 2000 objects: not an even split", count, i, n)
			}
		}
	}
}

func TestSelectorBounds(t *testing.T) {
	got := Of(ByNamespace, 2, 3).Selector().String()
	want := "shardRange(object.metadata.namespace, '0xaaaaaaaaaaaaaaab', '0x10000000000000000')"
	if got != want {
		t.Errorf("shard 2/3: %s, want %s", got, want)
	}
	if got := Of(ByNamespace, 0, 2).Selector().String(); got != "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')" {
		t.Errorf("shard 0/2: %s", got)
	}
	if !(Shard{}).All() || (Shard{}).String() != "" || !(Shard{}).Selector().Empty() {
		t.Error("the zero Shard must select everything")
	}
}

func TestUnitNames(t *testing.T) {
	for _, tc := range []struct {
		unit   string
		plugin string
		index  int
		ok     bool
	}{
		{Unit("app", 2), "app", 2, true},
		{"app", "app", 0, false},
		{"app/x", "app/x", 0, false},
		{"app/-1", "app/-1", 0, false},
	} {
		plugin, index, ok := SplitUnit(tc.unit)
		if plugin != tc.plugin || index != tc.index || ok != tc.ok {
			t.Errorf("SplitUnit(%q) = %q, %d, %v; want %q, %d, %v", tc.unit, plugin, index, ok, tc.plugin, tc.index, tc.ok)
		}
	}
}
