// Package gen writes the methods that package codec's generated types have: DecodeJSON and
// EncodeJSON on package codec, DeepCopyInto and DeepCopy, and a kind's APIVersionKind, Reset and
// DeepCopyObject. wasmrec build runs it on a plugin's own API types; the Kubernetes types under
// sdk/go/k8s were written by it. Plugins do not import it.
//
// It lives beside package codec, in the same module, because the code it writes calls codec's
// functions: a generator and a codec of different versions could not agree.
//
// It works on Type, a description of Go types that a front end fills in: from reflect, for
// Kubernetes' types, or from go/types, for a plugin's source.
package gen
