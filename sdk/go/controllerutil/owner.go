package controllerutil

import (
	"encoding/json"
	"fmt"
	"strings"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// OwnerReference is one of metadata.ownerReferences, metav1.OwnerReference's JSON shape.
type OwnerReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	// Controller marks the managing controller; an object has at most one.
	Controller bool `json:"controller,omitempty"`
	// BlockOwnerDeletion keeps a foreground deletion of the owner waiting for this object.
	BlockOwnerDeletion bool `json:"blockOwnerDeletion,omitempty"`
}

// AlreadyOwnedError is SetControllerReference's refusal: Object already has a controller,
// Owner, other than the owner given.
type AlreadyOwnedError struct {
	Object wasmrec.ObjectRef
	Owner  OwnerReference
}

func (e *AlreadyOwnedError) Error() string {
	return fmt.Sprintf("%s is already owned by another %s controller %s", describe(e.Object), e.Owner.Kind, e.Owner.Name)
}

// SetControllerReference makes owner the controller of object: an owner reference with
// controller and blockOwnerDeletion true, so that the garbage collector deletes object with
// owner and a manifest's Owns watch enqueues owner when object changes. A reference to the
// same owner (same API group, kind and name) is replaced; others are kept. It refuses, with an
// *AlreadyOwnedError, an object another owner controls, and, as the garbage collector would
// ignore the reference, a cluster-scoped object with a namespaced owner or an owner in another
// namespace. owner must have been read from the cluster: the reference needs its uid.
func SetControllerReference(owner, object *wasmrec.Object) error {
	ref, err := ownerRef(owner, object)
	if err != nil {
		return err
	}
	ref.Controller, ref.BlockOwnerDeletion = true, true
	if existing := GetControllerOf(object); existing != nil && !sameObject(*existing, ref) {
		return &AlreadyOwnedError{Object: object.Ref(), Owner: *existing}
	}
	return upsert(object, ref)
}

// SetOwnerReference adds owner to object's owner references, not as its controller: the
// garbage collector deletes object once all its owners are gone. A reference to the same owner
// (same API group, kind and name) is replaced, a controller reference included. It refuses what
// SetControllerReference refuses but for another controller.
func SetOwnerReference(owner, object *wasmrec.Object) error {
	ref, err := ownerRef(owner, object)
	if err != nil {
		return err
	}
	return upsert(object, ref)
}

// RemoveOwnerReference removes object's reference to owner (same API group, kind and name). It
// is an error if object has no such reference.
func RemoveOwnerReference(owner, object *wasmrec.Object) error {
	refs, _ := object.NestedSlice("metadata", "ownerReferences")
	target := OwnerReference{APIVersion: owner.APIVersion(), Kind: owner.Kind(), Name: owner.Name()}
	for i, r := range refs {
		if ref, ok := decodeRef(r); ok && sameObject(ref, target) {
			return setRefs(object, append(refs[:i:i], refs[i+1:]...))
		}
	}
	return fmt.Errorf("%s has no owner reference to %s %s", describe(object.Ref()), owner.Kind(), owner.Name())
}

// GetControllerOf returns object's controller reference (a copy), or nil if it has none.
func GetControllerOf(object *wasmrec.Object) *OwnerReference {
	refs, _ := object.NestedSlice("metadata", "ownerReferences")
	for _, r := range refs {
		if ref, ok := decodeRef(r); ok && ref.Controller {
			return &ref
		}
	}
	return nil
}

// IsControlledBy reports whether owner (by its uid) is object's controller.
func IsControlledBy(object, owner *wasmrec.Object) bool {
	ref := GetControllerOf(object)
	return ref != nil && owner.UID() != "" && ref.UID == owner.UID()
}

// ownerRef checks owner and object as SetOwnerReference does, and returns a reference to owner.
func ownerRef(owner, object *wasmrec.Object) (OwnerReference, error) {
	ref := OwnerReference{APIVersion: owner.APIVersion(), Kind: owner.Kind(), Name: owner.Name(), UID: owner.UID()}
	switch ownerNS, objNS := owner.Namespace(), object.Namespace(); {
	case ref.APIVersion == "" || ref.Kind == "" || ref.Name == "":
		return ref, fmt.Errorf("owner of %s needs apiVersion, kind and metadata.name (it has %q, %q, %q)", describe(object.Ref()), ref.APIVersion, ref.Kind, ref.Name)
	case ref.UID == "":
		return ref, fmt.Errorf("owner %s of %s has no metadata.uid: use the owner as read from the cluster", describe(owner.Ref()), describe(object.Ref()))
	case ownerNS != "" && objNS == "":
		return ref, fmt.Errorf("cluster-scoped %s must not have a namespace-scoped owner, owner's namespace %s", describe(object.Ref()), ownerNS)
	case ownerNS != "" && ownerNS != objNS:
		return ref, fmt.Errorf("cross-namespace owner references are disallowed, owner's namespace %s, %s's namespace %s", ownerNS, describe(object.Ref()), objNS)
	}
	return ref, nil
}

// upsert replaces object's reference to the same owner as ref, or appends ref.
func upsert(object *wasmrec.Object, ref OwnerReference) error {
	refs, _ := object.NestedSlice("metadata", "ownerReferences")
	refs = append([]any(nil), refs...)
	item := encodeRef(ref)
	for i, r := range refs {
		if old, ok := decodeRef(r); ok && sameObject(old, ref) {
			refs[i] = item
			return setRefs(object, refs)
		}
	}
	return setRefs(object, append(refs, item))
}

func setRefs(object *wasmrec.Object, refs []any) error {
	if len(refs) == 0 {
		if md, ok := object.NestedMap("metadata"); ok {
			delete(md, "ownerReferences")
		}
		return nil
	}
	return object.SetNested(refs, "metadata", "ownerReferences")
}

func encodeRef(ref OwnerReference) map[string]any {
	m := map[string]any{"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name, "uid": ref.UID}
	if ref.Controller {
		m["controller"] = true
	}
	if ref.BlockOwnerDeletion {
		m["blockOwnerDeletion"] = true
	}
	return m
}

// decodeRef reads one of ownerReferences, as the SDK's client decoded it or as a plugin set it
// (a map, or a value whose JSON is one).
func decodeRef(v any) (OwnerReference, bool) {
	var ref OwnerReference
	b, err := json.Marshal(v)
	if err != nil || json.Unmarshal(b, &ref) != nil {
		return ref, false
	}
	return ref, true
}

// sameObject reports whether two references name the same object: the same API group (any
// version), kind and name, as controller-runtime compares them.
func sameObject(a, b OwnerReference) bool {
	return group(a.APIVersion) == group(b.APIVersion) && a.Kind == b.Kind && a.Name == b.Name
}

func group(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return "" // "v1": the core group
	}
	return g
}

// describe names an object in messages: "ConfigMap demo/web", or "Namespace web".
func describe(ref wasmrec.ObjectRef) string {
	if ref.Namespace == "" {
		return ref.Kind + " " + ref.Name
	}
	return ref.Kind + " " + ref.Namespace + "/" + ref.Name
}
