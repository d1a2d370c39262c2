// Package shard splits a kind's objects into shards the way the API server's sharded list and
// watch (the ShardedListAndWatch feature gate, ListOptions.ShardSelector) does: by the 64-bit
// FNV-1a hash of a field, the object's namespace or its uid, cut into equal ranges.
//
// A Shard names one range. Its Selector is what informers pass to the API server, and what the
// host matches objects with when the server does not filter (the gate is off): both sides use
// apimachinery's sharding package, so they agree on every object.
package shard
