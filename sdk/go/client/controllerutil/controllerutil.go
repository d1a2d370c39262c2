package controllerutil

import (
	"context"
	"fmt"
	"slices"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	"github.com/wasmrec/wasmrec/sdk/go/codec"
	untyped "github.com/wasmrec/wasmrec/sdk/go/controllerutil"
	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/equality"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime/schema"
)

// OperationResult says what CreateOrUpdate or CreateOrPatch did: the untyped package's.
type OperationResult = untyped.OperationResult

const (
	OperationResultNone              = untyped.OperationResultNone
	OperationResultCreated           = untyped.OperationResultCreated
	OperationResultUpdated           = untyped.OperationResultUpdated
	OperationResultUpdatedStatus     = untyped.OperationResultUpdatedStatus
	OperationResultUpdatedStatusOnly = untyped.OperationResultUpdatedStatusOnly
)

// MutateFn changes the object to what it should be; it must not change its name or namespace.
type MutateFn = untyped.MutateFn

// AlreadyOwnedError is SetControllerReference's refusal: Object has another controller, Owner.
type AlreadyOwnedError struct {
	Object metav1.Object
	Owner  metav1.OwnerReference
}

func (e *AlreadyOwnedError) Error() string {
	return fmt.Sprintf("Object %s/%s is already owned by another %s controller %s", e.Object.GetNamespace(), e.Object.GetName(), e.Owner.Kind, e.Owner.Name)
}

func groupOf(apiVersion string) string {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.Group
}

// same reports references to the same object: same API group, kind and name.
func same(a, b metav1.OwnerReference) bool {
	return groupOf(a.APIVersion) == groupOf(b.APIVersion) && a.Kind == b.Kind && a.Name == b.Name
}

// ownerRef is a reference to owner, checked against object as the garbage collector checks it.
func ownerRef(owner, object client.Object) (metav1.OwnerReference, error) {
	apiVersion, kind := owner.APIVersionKind()
	if owner.GetUID() == "" {
		return metav1.OwnerReference{}, fmt.Errorf("owner %s %s has no uid: read it from the cluster first", kind, owner.GetName())
	}
	if owner.GetNamespace() != "" {
		if object.GetNamespace() == "" {
			return metav1.OwnerReference{}, fmt.Errorf("cluster-scoped resource must not have a namespace-scoped owner, owner's namespace %s", owner.GetNamespace())
		}
		if object.GetNamespace() != owner.GetNamespace() {
			return metav1.OwnerReference{}, fmt.Errorf("cross-namespace owner references are disallowed, owner's namespace %s, obj's namespace %s", owner.GetNamespace(), object.GetNamespace())
		}
	}
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID()}, nil
}

func upsert(object metav1.Object, ref metav1.OwnerReference) {
	refs := object.GetOwnerReferences()
	for i := range refs {
		if same(refs[i], ref) {
			refs[i] = ref
			object.SetOwnerReferences(refs)
			return
		}
	}
	object.SetOwnerReferences(append(refs, ref))
}

// SetControllerReference makes owner the controller of object (controller and
// blockOwnerDeletion true): the garbage collector deletes object with owner, and a manifest's
// Owns watch enqueues owner when object changes. A reference to the same owner is replaced. It
// refuses an object another controller owns (*AlreadyOwnedError), a cluster-scoped object with a
// namespaced owner, and an owner in another namespace. owner must have been read from the
// cluster: the reference needs its uid.
func SetControllerReference(owner, object client.Object) error {
	ref, err := ownerRef(owner, object)
	if err != nil {
		return err
	}
	yes := true
	ref.Controller, ref.BlockOwnerDeletion = &yes, &yes
	if existing := metav1.GetControllerOf(object); existing != nil && !same(*existing, ref) {
		return &AlreadyOwnedError{Object: object, Owner: *existing}
	}
	upsert(object, ref)
	return nil
}

// SetOwnerReference adds owner to object's owners, not as its controller.
func SetOwnerReference(owner, object client.Object) error {
	ref, err := ownerRef(owner, object)
	if err != nil {
		return err
	}
	upsert(object, ref)
	return nil
}

// RemoveOwnerReference removes object's reference to owner; it is an error if there is none.
func RemoveOwnerReference(owner, object client.Object) error {
	apiVersion, kind := owner.APIVersionKind()
	target := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: owner.GetName()}
	refs := object.GetOwnerReferences()
	for i := range refs {
		if same(refs[i], target) {
			object.SetOwnerReferences(slices.Delete(refs, i, i+1))
			return nil
		}
	}
	return fmt.Errorf("%s/%s has no owner reference to %s %s", object.GetNamespace(), object.GetName(), kind, owner.GetName())
}

// HasControllerReference reports whether object has a controller.
func HasControllerReference(object metav1.Object) bool { return metav1.GetControllerOf(object) != nil }

// AddFinalizer adds finalizer if object lacks it, and reports whether it did.
func AddFinalizer(object metav1.Object, finalizer string) bool {
	if ContainsFinalizer(object, finalizer) {
		return false
	}
	object.SetFinalizers(append(object.GetFinalizers(), finalizer))
	return true
}

// RemoveFinalizer removes finalizer, and reports whether object had it.
func RemoveFinalizer(object metav1.Object, finalizer string) bool {
	f := object.GetFinalizers()
	kept := slices.DeleteFunc(slices.Clone(f), func(s string) bool { return s == finalizer })
	if len(kept) == len(f) {
		return false
	}
	object.SetFinalizers(kept)
	return true
}

// ContainsFinalizer reports whether object has finalizer.
func ContainsFinalizer(object metav1.Object, finalizer string) bool {
	return slices.Contains(object.GetFinalizers(), finalizer)
}

// mutate calls f and checks that it left obj's name and namespace.
func mutate(f MutateFn, key client.ObjectKey, obj client.Object) error {
	if err := f(); err != nil {
		return err
	}
	if client.ObjectKeyFromObject(obj) != key {
		return fmt.Errorf("MutateFn cannot mutate object name and/or object namespace")
	}
	return nil
}

// getOrCreate reads obj; if it does not exist, it mutates and creates it (created true).
func getOrCreate(ctx context.Context, c *client.Client, obj client.Object, f MutateFn) (created bool, err error) {
	key := client.ObjectKeyFromObject(obj)
	err = c.Get(ctx, key, obj)
	if err == nil {
		return false, nil
	}
	if !wasmrec.IsNotFound(err) {
		return false, err
	}
	if err := mutate(f, key, obj); err != nil { // a failed read leaves obj as it was

		return false, err
	}
	return true, c.Create(ctx, obj)
}

// CreateOrUpdate reads obj (its name and namespace set) from the cluster, calls f on it, and
// updates it if f changed it; if it does not exist, f is called on obj as it was given, and
// obj created.
//
// f's changes are found as controller-runtime finds them, with equality.Semantic: a nil slice,
// map or []byte that was empty, or empty that was nil, is no change.
func CreateOrUpdate(ctx context.Context, c *client.Client, obj client.Object, f MutateFn) (OperationResult, error) {
	key := client.ObjectKeyFromObject(obj)
	created, err := getOrCreate(ctx, c, obj, f)
	if err != nil {
		return OperationResultNone, err
	}
	if created {
		return OperationResultCreated, nil
	}
	existing := obj.DeepCopyObject()
	if err := mutate(f, key, obj); err != nil {
		return OperationResultNone, err
	}
	if equality.Semantic.DeepEqual(existing, obj) {
		return OperationResultNone, nil
	}
	if err := c.Update(ctx, obj); err != nil {
		return OperationResultNone, err
	}
	return OperationResultUpdated, nil
}

// getAndMutate reads obj and calls f on it, and returns obj's JSON before and after; before is
// nil if obj did not exist and was created (res created), or on an error.
func getAndMutate(ctx context.Context, c *client.Client, obj client.Object, f MutateFn) (before, after []byte, res OperationResult, err error) {
	key := client.ObjectKeyFromObject(obj)
	created, err := getOrCreate(ctx, c, obj, f)
	if err != nil {
		return nil, nil, OperationResultNone, err
	}
	if created {
		return nil, nil, OperationResultCreated, nil
	}
	if before, err = codec.Marshal(obj); err != nil {
		return nil, nil, OperationResultNone, err
	}
	if err := mutate(f, key, obj); err != nil {
		return nil, nil, OperationResultNone, err
	}
	if after, err = codec.Marshal(obj); err != nil {
		return nil, nil, OperationResultNone, err
	}
	return before, after, OperationResultNone, nil
}

// CreateOrPatch is CreateOrUpdate with merge patches instead of an update: one of the object
// without its status, if that changed, then one of its status, through the status
// subresource, if that changed.
func CreateOrPatch(ctx context.Context, c *client.Client, obj client.Object, f MutateFn) (OperationResult, error) {
	beforeJSON, afterJSON, res, err := getAndMutate(ctx, c, obj, f)
	if err != nil || beforeJSON == nil {
		return res, err
	}
	before, err := jsonv.DecodeObject(beforeJSON)
	if err != nil {
		return OperationResultNone, err
	}
	after, err := jsonv.DecodeObject(afterJSON)
	if err != nil {
		return OperationResultNone, err
	}
	beforeStatus, afterStatus := before["status"], after["status"]
	delete(before, "status")
	delete(after, "status")
	result := OperationResultNone
	if p := jsonv.MergePatch(before, after); len(p) > 0 {
		data, err := jsonv.Marshal(p)
		if err != nil {
			return result, err
		}
		if err := c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", data)); err != nil {
			return result, err
		}
		result = OperationResultUpdated
	}
	bs, _ := beforeStatus.(map[string]any)
	as, _ := afterStatus.(map[string]any)
	if p := jsonv.MergePatch(map[string]any{"status": bs}, map[string]any{"status": as}); len(p) > 0 {
		data, err := jsonv.Marshal(p)
		if err != nil {
			return result, err
		}
		if err := c.Status().Patch(ctx, obj, client.RawPatch("application/merge-patch+json", data)); err != nil {
			return result, err
		}
		if result == OperationResultUpdated {
			result = OperationResultUpdatedStatus
		} else {
			result = OperationResultUpdatedStatusOnly
		}
	}
	return result, nil
}
