package release

// Version is the abi and sdk/go release a scaffold from `wasmrec new` requires.
const Version = "v0.3.11"

// Module paths of the published modules, and their folders in this repository.
const (
	ABIModule = "github.com/wasmrec/wasmrec/abi"
	SDKModule = "github.com/wasmrec/wasmrec/sdk/go"
	ABIDir    = "abi"
	SDKDir    = "sdk/go"
)
