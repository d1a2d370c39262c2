// Package scaffold writes a new plugin's folder: source that builds and tests as it is, test
// cases for `wasmrec test`, a host.yaml whose grant matches the manifest, and a sample object,
// for Go or C. It is what `wasmrec new` runs.
package scaffold
