// Package jsonv decodes JSON into what encoding/json makes of it for an `any` (map[string]any,
// []any, string, float64, bool, nil), and encodes such values as json.Marshal does, without
// reflection: several times faster in a wasm guest, where encoding/json's reflection is slow.
// The SDK reads and writes untyped objects (wasmrec.Object) with it.
//
// It is exact: where it is unsure of its reading (invalid JSON, a number out of float64's range,
// nesting past encoding/json's limit) or writing (NaN, a cycle), it hands the value to
// encoding/json, so that the result and the error are encoding/json's own.
package jsonv
