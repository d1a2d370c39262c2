// Package abi is the contract between the wasmrec host and its plugins: the ABI version, the
// names of the exports a plugin provides and of the host functions it may import, the encodings
// of requests and results, and the status codes. It depends on the standard library only, so
// that the host and the Go SDK can both import it.
//
// ABI.md beside this file is the written, language-neutral specification.
package abi
