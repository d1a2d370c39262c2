module github.com/wasmrec/wasmrec/abi

go 1.24
