//go:build !wasip1

package wasmrec

import "github.com/wasmrec/wasmrec/abi"

// Outside a wasm plugin there is no host: calls fail, logs are dropped. This lets plugin code
// compile and its pure parts be tested natively; package fake stands in for the host in tests
// (NewClientWith, SetLogTransport).
func hostCall(fn string, _ []byte) (abi.Status, []byte) {
	return abi.StatusInternal, []byte(fn + ": not running inside wasmrec")
}

func hostLog(int32, []byte) {}
