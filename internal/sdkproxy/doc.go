// Package sdkproxy carries the Go modules a Go plugin requires, abi and sdk/go at
// release.Version, inside the wasmrec binary, so that `wasmrec new`, `wasmrec build` and the
// author's own `go test` work on a machine that can reach no published copy of them.
//
// The modules are written as a file-based module proxy (GOPROXY=file://DIR), the layout the
// module proxy protocol defines, by Write: `make build` and `make install` write them into
// modules/ before compiling, and the binary embeds that folder. Env writes the embedded proxy
// once into the user's cache and returns the environment for a go command that tries it before
// the user's own GOPROXY, and skips the checksum database for these two modules only (it does
// not know them before they are published). The go command then copies them into the module
// cache and records their checksums in go.sum as it does for any module, so nothing in a
// plugin's folder points at the cache, and later go commands need neither the proxy nor this
// package.
//
// A binary built without them (plain `go build` or `go install` of cmd/wasmrec) carries none:
// Env then leaves the environment as it is, and Carried reports false so that a failure to fetch
// the SDK can say how to get a binary that carries it.
package sdkproxy
