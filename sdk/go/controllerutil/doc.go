// Package controllerutil holds the helpers a controller-runtime user reaches for, under
// controller-runtime's names, for wasmrec.Object: CreateOrUpdate and CreateOrPatch; controller
// and owner references (SetControllerReference, SetOwnerReference, RemoveOwnerReference,
// GetControllerOf, IsControlledBy); finalizers (AddFinalizer, RemoveFinalizer,
// ContainsFinalizer); and status conditions as apimachinery's meta package keeps them
// (SetStatusCondition, FindStatusCondition, RemoveStatusCondition, IsStatusConditionTrue,
// IsStatusConditionFalse).
//
//	cm := wasmrec.NewObject("v1", "ConfigMap", src.Namespace(), src.Name()+"-copy")
//	op, err := controllerutil.CreateOrPatch(ctx, client, cm, func() error {
//		cm.Object["data"] = src.Object["data"]
//		return controllerutil.SetControllerReference(src, cm)
//	})
//
// It is built on the wasmrec package's public API alone, and like it imports only the
// standard library and abi.
package controllerutil
