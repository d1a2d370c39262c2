module example.com/cronjob

go 1.24

require github.com/wasmrec/wasmrec/sdk/go v0.3.11

require github.com/wasmrec/wasmrec/abi v0.3.11 // indirect
