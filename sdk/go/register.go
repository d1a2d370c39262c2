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
	if err := checkMaps(m); err != nil {
		panic(fmt.Sprintf("wasmrec: %v", err))
	}
	registered.r, registered.m = r, m
}

// AddPermissions adds ps to the permissions of the manifest given to Register, before or after
// it: `wasmrec build` writes a call of it from the module's kubebuilder RBAC markers
// (+kubebuilder:rbac:groups=...,resources=...,verbs=...), in zz_generated.wasmrec_rbac.go.
// Call it from init.
func AddPermissions(ps ...Permission) {
	registered.added = append(registered.added, ps...)
}

// AddedPermissions are the permissions AddPermissions added.
func AddedPermissions() []Permission { return registered.added }

// manifestJSON is the manifest the host reads: Register's, with the permissions added.
func manifestJSON() []byte {
	m := registered.m
	m.Permissions = append(m.Permissions[:len(m.Permissions):len(m.Permissions)], registered.added...)
	if err := m.Validate(); err != nil {
		panic(fmt.Sprintf("wasmrec: %v", err))
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("wasmrec: encoding the manifest: %v", err))
	}
	return b
}
