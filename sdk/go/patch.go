package wasmrec

import "github.com/wasmrec/wasmrec/abi"

// Patch types, for Client.Patch and StatusClient.Patch.
const (
	PatchMerge     = abi.PatchMerge     // JSON merge patch (RFC 7386)
	PatchJSON      = abi.PatchJSON      // JSON patch (RFC 6902)
	PatchStrategic = abi.PatchStrategic // strategic merge patch (built-in kinds only)
	PatchApply     = abi.PatchApply     // server-side apply
)
