module github.com/wasmrec/wasmrec/host/wasm/testdata/hashgo

go 1.26.0

require github.com/wasmrec/wasmrec/sdk/go v0.0.0

require github.com/wasmrec/wasmrec/abi v0.0.0 // indirect

replace (
	github.com/wasmrec/wasmrec/abi => ../../../../abi
	github.com/wasmrec/wasmrec/sdk/go => ../../../../sdk/go
)
