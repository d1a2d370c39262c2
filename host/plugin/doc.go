// Package plugin turns a wasm module into a running controller: it reads the operator's config,
// checks the module's manifest against the permissions granted (package policy), builds the
// controller's sources from the manifest, and swaps a new module in without stopping: the new
// one is compiled and checked, its watches started and synced, and only then published, while
// reconciles in flight finish on the old one.
//
// The jobs around it have their own packages: internal/guest serves the guest's host calls,
// internal/modsource reads modules and follows their files and tags, internal/versions keeps
// the versions swapped out and the ones refused, and objects runs the plugins that Plugin
// objects describe, through this package's public API.
package plugin
