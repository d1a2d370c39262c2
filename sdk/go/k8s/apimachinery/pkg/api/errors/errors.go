package errors

import wasmrec "github.com/wasmrec/wasmrec/sdk/go"

// IsNotFound reports an object that does not exist.
func IsNotFound(err error) bool { return wasmrec.IsNotFound(err) }

// IsAlreadyExists reports a create of an object that exists.
func IsAlreadyExists(err error) bool { return wasmrec.IsAlreadyExists(err) }

// IsConflict reports a write of a stale resourceVersion.
func IsConflict(err error) bool { return wasmrec.IsConflict(err) }

// IsForbidden reports a call the plugin is not permitted.
func IsForbidden(err error) bool { return wasmrec.IsForbidden(err) }

// IsInvalid reports an object the API server refused as invalid.
func IsInvalid(err error) bool { return wasmrec.IsInvalid(err) }

// IsBadRequest reports a call that could not be taken as asked: a malformed request, or a
// write from a map function.
func IsBadRequest(err error) bool { return wasmrec.IsBadRequest(err) }
