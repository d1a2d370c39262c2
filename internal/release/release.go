// Package release holds the version of the modules plugin authors require: abi and sdk/go are
// released together, tagged abi/<Version> and sdk/go/<Version>, and every go.mod in this
// repository that requires them names this version (a test checks it).
package release

// Version is the abi and sdk/go release a scaffold from `wasmrec new` requires.
const Version = "v0.1.0"

// Module paths of the published modules, and their folders in this repository.
const (
	ABIModule = "github.com/wasmrec/wasmrec/abi"
	SDKModule = "github.com/wasmrec/wasmrec/sdk/go"
	ABIDir    = "abi"
	SDKDir    = "sdk/go"
)
