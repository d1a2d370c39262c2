// Package testenv is what tests need of their environment, and what they do without it.
//
// When something a test needs was not built or installed (the local control plane, the test
// modules, a registry, a browser): `go test ./...` on a clean checkout skips it, saying what to
// run; `make test`, which sets WASMREC_TEST_ALL=1 and builds all of it first, fails instead, so
// nothing it should run is skipped there. Browser gives a test a headless Chromium tab, and
// PluginModule a copy of a test plugin's module built against this tree's SDK.
package testenv
