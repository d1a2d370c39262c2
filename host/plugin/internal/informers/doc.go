// Package informers is one plugin's hold on the host's shared informers: which informers it
// reads a kind through (Keys: one per namespace of the plugin or one for all, per shard it runs,
// as Sharding says), and the Set its controller's sources, its warm standby, its guest's reads
// and the lists a swap makes get them from, so that what the plugin holds, and why, is known in
// one place and let go of in one place.
package informers
