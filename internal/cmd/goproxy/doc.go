// Command goproxy writes the repository's published modules (abi and sdk/go, at
// release.Version, from the working tree) as a file-based Go module proxy, the layout
// GOPROXY=file:///DIR reads: DIR/<module>/@v/{list,<version>.info,.mod,.zip}.
//
// `make build` and `make install` run it to write internal/sdkproxy/modules, which the wasmrec
// binary carries and serves to the go command (package sdkproxy).
//
//	go run ./internal/cmd/goproxy -o internal/sdkproxy/modules
package main
