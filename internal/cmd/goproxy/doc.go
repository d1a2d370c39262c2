// Command goproxy writes the repository's published modules (abi and sdk/go, at
// release.Version, from the working tree) as a file-based Go module proxy, the layout
// GOPROXY=file:///DIR reads: DIR/<module>/@v/{list,<version>.info,.mod,.zip}.
//
// It is how this repository proves that a plugin outside it builds with no replace line, and how
// `make check` tidies the modules that require abi and sdk/go before those are tagged.
//
//	go run ./internal/cmd/goproxy -o bin/goproxy
package main
