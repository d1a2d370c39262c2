module github.com/wasmrec/wasmrec/sdk/go

go 1.24

require github.com/wasmrec/wasmrec/abi v0.3.11
