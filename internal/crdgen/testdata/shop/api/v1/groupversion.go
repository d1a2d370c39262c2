// Package v1 holds the shop.example.com/v1 API: Orders and the Shelf they are filled from.
// +kubebuilder:object:generate=true
// +groupName=shop.example.com
package v1

import "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime"

// registered are the kinds of this package; registering one needs its generated
// DeepCopyObject, so the package does not compile before wasmrec build has run.
var registered []runtime.Object

func register(objs ...runtime.Object) { registered = append(registered, objs...) }
