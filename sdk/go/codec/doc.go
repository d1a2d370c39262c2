// Package codec reads and writes JSON for generated Go types without reflection: the
// Kubernetes types under sdk/go/k8s, and a plugin's own CRD types, are decoded and encoded by
// methods that wasmrec generates for them, and those methods are built on this package.
//
// In a wasm guest, encoding/json's reflection is several times slower than code that knows
// the type, and it keeps every type's reflection data in the module; RATIONALE.md has the
// figures.
//
// A generated type decodes as encoding/json decodes it into a zero value, with two
// differences that Kubernetes' own decoder (sigs.k8s.io/json) shares: object keys match a
// field's JSON name exactly, not ignoring case, and the first value of the wrong type ends the
// decode with its error. It encodes byte for byte as json.Marshal does.
package codec
