// Package plugin turns a wasm module into a running controller: it reads the operator's config,
// checks the module's manifest against the permissions granted, builds the controller's
// sources from the manifest, and serves the guest's host calls (cache reads, API writes,
// events), each checked against the plugin's permissions and rate-limited.
package plugin
