// Package watches turns a plugin's manifest into its controller's sources, as
// controller-runtime's builder turns For, Owns and Watches into a controller's: for each watch,
// the informers it reads (one per namespace of the plugin or one for all, per shard run), its
// predicates and the handler that makes requests of its events.
package watches
