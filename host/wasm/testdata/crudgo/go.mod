module github.com/wasmrec/wasmrec/host/wasm/testdata/crudgo

go 1.24

require github.com/wasmrec/wasmrec/sdk/go v0.0.0

require github.com/wasmrec/wasmrec/abi v0.0.0

replace (
	github.com/wasmrec/wasmrec/abi => ../../../../abi
	github.com/wasmrec/wasmrec/sdk/go => ../../../../sdk/go
)
