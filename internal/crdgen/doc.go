// Package crdgen writes the generated methods of a Go plugin's own API types, the Go types of
// its custom resources, as controller-gen writes deep copies for kubebuilder projects: DecodeJSON
// and EncodeJSON on package codec, DeepCopyInto and DeepCopy, and for each kind APIVersionKind,
// Reset and DeepCopyObject, in one zz_generated.wasmrec.go per package. wasmrec build runs it
// before it compiles.
//
// It reads kubebuilder's markers:
//
//	// +kubebuilder:object:root=true       on a type: a kind (or a list of one)
//	// +kubebuilder:object:generate=true   in the package comment: every type of the package
//	// +kubebuilder:object:generate=false  on a type: not this one
//	// +groupName=batch.example.com        in the package comment: the kinds' API group
//	// +versionName=v1                     in the package comment: their version (else the package name)
//
// Without generate=true in the package comment, the kinds and the package's types they hold are
// generated for. The package is type-checked from source, without the file it writes (so a
// stale one is never read), and its imports from their compiled export data.
package crdgen
