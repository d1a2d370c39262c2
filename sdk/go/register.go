package wasmrec

import (
	"encoding/json"
	"fmt"
)

// Register makes r the plugin's reconciler and m its manifest. Call it once, from init (a
// plugin's main is never run).
func Register(m Manifest, r Reconciler) {
	if registered.r != nil {
		panic("wasmrec: Register called twice")
	}
	if err := m.Validate(); err != nil {
		panic(fmt.Sprintf("wasmrec: %v", err))
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("wasmrec: encoding the manifest: %v", err))
	}
	registered.r, registered.manifest = r, b
}
