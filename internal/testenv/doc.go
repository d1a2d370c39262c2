// Package testenv decides what a test does when something it needs was not built or installed
// (the local control plane, the test modules, a registry): `go test ./...` on a clean checkout
// skips it, saying what to run; `make test`, which sets WASMREC_TEST_ALL=1 and builds all of
// it first, fails instead, so nothing it should run is skipped there.
package testenv
