// Package plugin turns a wasm module into a running controller: it reads the operator's config,
// checks the module's manifest against the permissions granted (package policy), builds the
// controller's sources from the manifest, and swaps a new module in without stopping: the new
// one is compiled and checked, its watches started and synced, and only then published, while
// reconciles in flight finish on the old one.
//
// A Supervisor keeps one plugin loaded, retried and reported, whatever its settings come from
// (the host config, a plugin object); a plugin acts as the host or as a ServiceAccount of its
// own (identity.go), and ObjectPolicy is the operator's bound on plugin objects.
//
// The jobs around it have their own packages: internal/guest serves the guest's host calls,
// internal/modsource reads modules and follows their files and tags, internal/versions keeps
// the versions swapped out and the ones refused, and objects runs the plugins that Plugin and
// ClusterPlugin objects describe, through this package's public API.
package plugin
