package abi

import "fmt"

// Version is the ABI version this package describes. A plugin says which version it speaks by
// exporting a function named VersionExportPrefix + the number ("wasmrec_abi_v1").
const Version = 1

// Names of the exports a plugin provides.
const (
	// VersionExportPrefix starts the version marker export: a function with no parameters and
	// no results, never called, named "wasmrec_abi_v<N>".
	VersionExportPrefix = "wasmrec_abi_v"
	// ExportVersion is the marker for this Version.
	ExportVersion = "wasmrec_abi_v1"
	// ExportManifest () -> i64: the manifest JSON in guest memory, as PackPtrLen(ptr, len).
	ExportManifest = "wasmrec_manifest"
	// ExportReconcile (request_len i32) -> i64: reconciles the pending request (read it with
	// the read import); returns 0 for a zero Result or PackPtrLen of a result envelope.
	ExportReconcile = "wasmrec_reconcile"
	// ExportMap (watch i32, object_len i32) -> i64: maps the pending object, of the manifest's
	// watches[watch], to the requests it enqueues; returns 0 for none or PackPtrLen of a list of
	// request envelopes (AppendRequest, one after another). Optional: needed by a manifest with
	// a watch whose map is MapFunc.
	ExportMap = "wasmrec_map"
	// ExportInitialize is the WASI reactor initialiser; the host calls it once per instance
	// if present.
	ExportInitialize = "_initialize"
)

// ImportModule is the module name of every host function.
const ImportModule = "wasmrec"

// Names of the host functions. Each takes (ptr i32, len i32) of a JSON request in guest memory
// and returns an i64 made by PackStatusLen: the Status and the length of the pending response
// (the object JSON on success, an error message otherwise), which the guest copies out with
// read. read and log are the exceptions, see ABI.md.
const (
	ImportRead         = "read"          // (ptr i32, len i32) -> i32 bytes copied
	ImportLog          = "log"           // (level i32, ptr i32, len i32)
	ImportGet          = "get"           // GetRequest -> object
	ImportList         = "list"          // ListRequest -> {"items": [...]}
	ImportCreate       = "create"        // object -> object
	ImportUpdate       = "update"        // object -> object
	ImportUpdateStatus = "update_status" // object -> object
	ImportPatch        = "patch"         // PatchRequest -> object
	ImportDelete       = "delete"        // DeleteRequest -> nothing
	ImportEvent        = "event"         // EventRequest -> nothing
)

// HostFunctions lists every host function of this Version with its wasm signature.
var HostFunctions = map[string]Signature{
	ImportRead:         {Params: []ValueType{I32, I32}, Results: []ValueType{I32}},
	ImportLog:          {Params: []ValueType{I32, I32, I32}},
	ImportGet:          callSignature,
	ImportList:         callSignature,
	ImportCreate:       callSignature,
	ImportUpdate:       callSignature,
	ImportUpdateStatus: callSignature,
	ImportPatch:        callSignature,
	ImportDelete:       callSignature,
	ImportEvent:        callSignature,
}

var callSignature = Signature{Params: []ValueType{I32, I32}, Results: []ValueType{I64}}

// Exports lists the exports a plugin of this Version must provide, with their signatures.
var Exports = map[string]Signature{
	ExportVersion:   {},
	ExportManifest:  {Results: []ValueType{I64}},
	ExportReconcile: {Params: []ValueType{I32}, Results: []ValueType{I64}},
}

// OptionalExports lists the exports a plugin of this Version may provide, with their signatures.
var OptionalExports = map[string]Signature{
	ExportMap: {Params: []ValueType{I32, I32}, Results: []ValueType{I64}},
}

// ValueType is a wasm value type.
type ValueType byte

// The value types the ABI uses.
const (
	I32 ValueType = 0x7f
	I64 ValueType = 0x7e
)

func (t ValueType) String() string {
	switch t {
	case I32:
		return "i32"
	case I64:
		return "i64"
	}
	return fmt.Sprintf("valtype(%#x)", byte(t))
}

// Signature is a function's parameter and result types.
type Signature struct {
	Params  []ValueType
	Results []ValueType
}

func (s Signature) String() string { return fmt.Sprintf("%v -> %v", s.Params, s.Results) }

// Status is the outcome of a host function.
type Status uint32

// Statuses. A guest tests for them; an SDK turns them into errors (IsNotFound, IsConflict...).
const (
	StatusOK            Status = 0
	StatusNotFound      Status = 1  // the object does not exist (in the cache, or on delete)
	StatusAlreadyExists Status = 2  // create of an object that exists
	StatusConflict      Status = 3  // the resourceVersion is stale: read again and retry
	StatusForbidden     Status = 4  // outside the permissions granted to the plugin, or refused by the API server
	StatusInvalid       Status = 5  // the API server refused the object as invalid
	StatusTooLarge      Status = 6  // the request or the response exceeds the host's size limit
	StatusTimeout       Status = 7  // the reconcile's deadline passed (waiting for the API server or the write rate limit)
	StatusUnavailable   Status = 8  // the API server could not be reached or is overloaded: retry later
	StatusBadRequest    Status = 9  // the host could not understand the request (malformed JSON, unknown kind)
	StatusInternal      Status = 10 // anything else
)

var statusNames = [...]string{"ok", "not found", "already exists", "conflict", "forbidden", "invalid", "too large", "timeout", "unavailable", "bad request", "internal"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint32(s))
}

// Log levels for the log import.
const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

// PackPtrLen packs a guest pointer and length into the i64 an export returns.
func PackPtrLen(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

// UnpackPtrLen reverses PackPtrLen.
func UnpackPtrLen(v uint64) (ptr, n uint32) { return uint32(v >> 32), uint32(v) }

// PackStatusLen packs a Status and the pending response's length into the i64 a host function
// returns.
func PackStatusLen(s Status, n uint32) uint64 { return uint64(s)<<32 | uint64(n) }

// UnpackStatusLen reverses PackStatusLen.
func UnpackStatusLen(v uint64) (Status, uint32) { return Status(v >> 32), uint32(v) }
