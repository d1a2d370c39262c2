// Package controllerutil holds controller-runtime's controllerutil helpers for the typed
// objects of sdk/go/k8s and package client: CreateOrUpdate and CreateOrPatch, controller and
// owner references (SetControllerReference, SetOwnerReference, RemoveOwnerReference,
// HasControllerReference), and finalizers (AddFinalizer, RemoveFinalizer, ContainsFinalizer).
// Code written against sigs.k8s.io/controller-runtime/pkg/controller/controllerutil ports by
// changing its import and dropping the scheme argument: a typed object knows its kind.
//
// Status conditions are in the generated apimachinery's api/meta, as in apimachinery.
// Package github.com/wasmrec/wasmrec/sdk/go/controllerutil has the same helpers for
// *wasmrec.Object.
package controllerutil
