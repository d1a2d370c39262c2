// Package wasmrec is the Go SDK for wasmrec plugins: write a Reconciler, Register it with its
// Manifest in init, and build with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// The SDK depends only on the standard library and wasmrec's abi module. Typed objects are the
// generated Kubernetes types of github.com/wasmrec/wasmrec/sdk/go/k8s/... (k8s.io/api's names
// under that path), read and written with package client
// (github.com/wasmrec/wasmrec/sdk/go/client), shaped as controller-runtime's. This package's
// Client reads and writes Object, a JSON map, for kinds without Go types (a CRD's); FromTyped and
// Object.Into convert between the two.
//
// Package controllerutil (github.com/wasmrec/wasmrec/sdk/go/controllerutil) has the helpers a
// controller-runtime user reaches for, under its names: CreateOrUpdate and CreateOrPatch,
// SetControllerReference and the other owner references, finalizers, and status conditions
// (SetStatusCondition...). Manifests name predicate types and watch mappings with the
// Predicate* and Map* constants.
//
// To test a reconciler with go test, give it the Client of a fake.Cluster (package
// github.com/wasmrec/wasmrec/sdk/go/fake): objects in memory, answered as the host would.
package wasmrec
