// Package sdk holds the C SDK's sources (c/), so that `wasmrec build` compiles C plugins with no
// checkout of this repository: it writes them to a cache folder and adds them to the build. The
// Go SDK is its own module, in go/.
package sdk

import _ "embed"

// CHeader and CSource are c/wasmrec.h and c/wasmrec.c.
var (
	//go:embed c/wasmrec.h
	CHeader []byte
	//go:embed c/wasmrec.c
	CSource []byte
)
