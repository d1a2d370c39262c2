package shard

import (
	"fmt"
	"math/bits"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
)

// Fields a shard hashes.
const (
	// ByNamespace keeps a namespace's objects together: of every kind, in one shard.
	ByNamespace = "object.metadata.namespace"
	// ByUID spreads objects by uid, for cluster-scoped kinds.
	ByUID = "object.metadata.uid"
)

// Shard is range Index of Count equal ranges of the hash of Field. The zero value is no shard:
// everything.
type Shard struct {
	Index, Count int
	Field        string
}

// Of returns shard index of count shards of field.
func Of(field string, index, count int) Shard {
	return Shard{Index: index, Count: count, Field: field}
}

// All reports whether s is no shard (it selects every object).
func (s Shard) All() bool { return s.Count <= 1 }

// String is "1/3" (shard 1 of 3), or "" for no shard: the spelling of metrics and logs.
func (s Shard) String() string {
	if s.All() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// By is what the shard hashes: "namespace" or "uid".
func (s Shard) By() string {
	if s.Field == ByNamespace {
		return "namespace"
	}
	return "uid"
}

// bound is the first hash of range i of n: ceil(i * 2^64 / n), as the API server writes it;
// range n-1 ends at 2^64, which only the upper bound may name.
func bound(i, n int) string {
	if i >= n {
		return "0x10000000000000000"
	}
	q, r := bits.Div64(uint64(i), 0, uint64(n)) // (i << 64) / n; i < n, so it fits
	if r != 0 {
		q++
	}
	return fmt.Sprintf("0x%016x", q)
}

// Selector is the shard's selector, for ListOptions.ShardSelector (its String) and for matching.
func (s Shard) Selector() sharding.Selector {
	if s.All() {
		return sharding.Everything()
	}
	return sharding.NewSelector(sharding.ShardRangeRequirement{Key: s.Field, Start: bound(s.Index, s.Count), End: bound(s.Index+1, s.Count)})
}

// Matches reports whether obj falls in the shard. It agrees with Selector().Matches, without
// building the selector.
func (s Shard) Matches(obj runtime.Object) bool {
	if s.All() {
		return true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	v := m.GetNamespace()
	if s.Field == ByUID {
		v = string(m.GetUID())
	}
	return IndexOf(v, s.Count) == s.Index
}

// IndexOf is the shard of count that a field's value falls in.
func IndexOf(value string, count int) int {
	if count <= 1 {
		return 0
	}
	hi, _ := bits.Mul64(Hash(value), uint64(count)) // floor(h * count / 2^64)
	return int(hi)
}

// Hash is the 64-bit FNV-1a hash of value, as sharding.HashField computes it. Its top bits,
// which pick the range, move little between values that differ only in their last bytes
// ("cm-0001", "cm-0002"): the API server's sharding spreads names made by generateName, not
// sequential ones.
func Hash(value string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(value); i++ {
		h ^= uint64(value[i])
		h *= 1099511628211
	}
	return h
}
