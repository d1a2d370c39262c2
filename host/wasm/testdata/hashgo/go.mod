module github.com/wasmrec/wasmrec/host/wasm/testdata/hashgo

go 1.26.0

require github.com/wasmrec/wasmrec/sdk/go v0.3.11

require github.com/wasmrec/wasmrec/abi v0.3.11 // indirect
