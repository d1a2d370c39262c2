// Command goproxy writes the repository's published modules (abi and sdk/go, at
// release.Version, from the working tree) as a file-based Go module proxy, the layout
// GOPROXY=file:///DIR reads: DIR/<module>/@v/{list,<version>.info,.mod,.zip}.
//
// `make build` and `make install` run it to write internal/sdkproxy/modules, which the wasmrec
// binary carries and serves to the go command (package sdkproxy). It holds the files git tracks
// (or would), as a published version does. Then it removes that version of the modules from the
// go command's module cache if the cache holds other contents (an earlier tree's), saying so:
// -drop-stale=false leaves the cache alone.
//
//	go run ./internal/cmd/goproxy -o internal/sdkproxy/modules
package main
