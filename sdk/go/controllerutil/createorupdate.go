package controllerutil

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// OperationResult is what CreateOrUpdate or CreateOrPatch did. The values complete the
// sentence "ConfigMap demo/web has been ...".
type OperationResult string

const (
	// OperationResultNone: the object was as mutate left it; nothing was written.
	OperationResultNone OperationResult = "unchanged"
	// OperationResultCreated: the object did not exist and was created.
	OperationResultCreated OperationResult = "created"
	// OperationResultUpdated: the object was updated (CreateOrUpdate) or patched
	// (CreateOrPatch).
	OperationResultUpdated OperationResult = "updated"
	// OperationResultUpdatedStatus: CreateOrPatch patched the object and its status.
	OperationResultUpdatedStatus OperationResult = "updatedStatus"
	// OperationResultUpdatedStatusOnly: CreateOrPatch patched the status alone.
	OperationResultUpdatedStatusOnly OperationResult = "updatedStatusOnly"
)

// MutateFn makes the object CreateOrUpdate or CreateOrPatch was given into what it should be.
// It sees the object as the cluster holds it, or, if it does not exist, as it was given. It may
// not change the object's name or namespace.
type MutateFn func() error

// CreateOrUpdate gets obj (by its apiVersion, kind, namespace and name) into obj, calls mutate,
// and creates it if it did not exist, or updates it if mutate changed it, as controller-runtime's
// controllerutil.CreateOrUpdate does. obj is left as the API server returned it.
//
// What obj held besides apiVersion, kind, namespace and name is replaced by the cluster's
// object before mutate runs: set the fields in mutate. The update is of the whole object, with
// its resourceVersion (a conflict if the object changed since the get: return the error and
// the request is retried), and needs the update permission; changes mutate makes to status are
// not written (the status subresource keeps them out). "Changed" is compared in JSON: a field
// mutate sets to a value the API server then defaults differently makes every call an update.
func CreateOrUpdate(ctx context.Context, c *wasmrec.Client, obj *wasmrec.Object, mutate MutateFn) (OperationResult, error) {
	before, res, err := mutateOrCreate(ctx, c, obj, mutate)
	if err != nil || before == nil {
		return res, err
	}
	if jsonEqual(before.Object, obj.Object) {
		return OperationResultNone, nil
	}
	got, err := c.Update(ctx, obj)
	if err != nil {
		return OperationResultNone, err
	}
	obj.Object = got.Object
	return OperationResultUpdated, nil
}

// CreateOrPatch gets obj (by its apiVersion, kind, namespace and name) into obj, calls mutate,
// and creates it if it did not exist, or else sends a JSON merge patch (RFC 7386) of what mutate
// changed, as controller-runtime's controllerutil.CreateOrPatch does: a patch of the object
// without its status if that changed, then a patch of the status subresource if the status
// changed (OperationResultUpdated, OperationResultUpdatedStatus or
// OperationResultUpdatedStatusOnly). obj is left as the API server returned it.
//
// As with CreateOrUpdate, obj's fields other than its name are replaced by the cluster's before
// mutate runs. The patches carry no resourceVersion: a field another writer set between the get
// and the patch is kept unless mutate changed the same field. A status set by mutate on an
// object that does not exist is dropped by the create, as the API server drops it: requeue and
// set it on the next call. It needs the get, create and patch permissions (patch on the
// resource's /status for status changes).
func CreateOrPatch(ctx context.Context, c *wasmrec.Client, obj *wasmrec.Object, mutate MutateFn) (OperationResult, error) {
	ref := obj.Ref()
	before, res, err := mutateOrCreate(ctx, c, obj, mutate)
	if err != nil || before == nil {
		return res, err
	}
	after, err := normalize(obj.Object)
	if err != nil {
		return OperationResultNone, fmt.Errorf("%s: %w", describe(ref), err)
	}
	beforeStatus, hadStatus := before.Object["status"]
	afterStatus, hasStatus := after["status"]
	delete(before.Object, "status")
	delete(after, "status")

	result := OperationResultNone
	if patch := mergePatch(before.Object, after); len(patch) > 0 {
		got, err := c.Patch(ctx, ref, wasmrec.PatchMerge, patch)
		if err != nil {
			return result, err
		}
		obj.Object = got.Object
		result = OperationResultUpdated
	}
	if (hadStatus || hasStatus) && !jsonEqual(beforeStatus, afterStatus) {
		var patch any = afterStatus // a status that is not an object replaces the old one whole
		bm, bok := beforeStatus.(map[string]any)
		am, aok := afterStatus.(map[string]any)
		if bok && aok {
			patch = mergePatch(bm, am)
		}
		if result == OperationResultUpdated { // the patch's answer holds the old status
			obj.Object["status"] = afterStatus
		}
		got, err := c.Status().Patch(ctx, ref, wasmrec.PatchMerge, map[string]any{"status": patch})
		if err != nil {
			return result, err
		}
		obj.Object = got.Object
		if result == OperationResultUpdated {
			result = OperationResultUpdatedStatus
		} else {
			result = OperationResultUpdatedStatusOnly
		}
	}
	return result, nil
}

// get reads the object obj names into obj; false if it does not exist, leaving obj as it was.
func get(ctx context.Context, c *wasmrec.Client, obj *wasmrec.Object) (bool, error) {
	got, err := c.Get(ctx, obj.APIVersion(), obj.Kind(), obj.Namespace(), obj.Name())
	if wasmrec.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, f := range []string{"apiVersion", "kind"} { // as asked, if the answer leaves them out
		if _, ok := got.Object[f]; !ok {
			got.Object[f] = obj.Object[f]
		}
	}
	obj.Object = got.Object
	return true, nil
}

func create(ctx context.Context, c *wasmrec.Client, obj *wasmrec.Object, ref wasmrec.ObjectRef, mutate MutateFn) (OperationResult, error) {
	if err := callMutate(mutate, ref, obj); err != nil {
		return OperationResultNone, err
	}
	got, err := c.Create(ctx, obj)
	if err != nil {
		return OperationResultNone, err
	}
	obj.Object = got.Object
	return OperationResultCreated, nil
}

// callMutate calls mutate (nil: no change) and refuses a change of obj's name or namespace.
func callMutate(mutate MutateFn, ref wasmrec.ObjectRef, obj *wasmrec.Object) error {
	if mutate != nil {
		if err := mutate(); err != nil {
			return err
		}
	}
	if obj.Namespace() != ref.Namespace || obj.Name() != ref.Name {
		return fmt.Errorf("mutate may not change the name or namespace of %s: it made it %s", describe(ref), describe(obj.Ref()))
	}
	return nil
}

// mergePatch returns the JSON merge patch (RFC 7386) that makes before into after: members
// after changed or added, null for those it removed, objects patched member by member, arrays
// and other values whole. Both are decoded JSON.
func mergePatch(before, after map[string]any) map[string]any {
	patch := map[string]any{}
	for k := range before {
		if _, ok := after[k]; !ok {
			patch[k] = nil
		}
	}
	for k, a := range after {
		b, ok := before[k]
		if ok && jsonEqual(a, b) {
			continue
		}
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if ok && aok && bok {
			patch[k] = mergePatch(bm, am)
			continue
		}
		patch[k] = a
	}
	return patch
}

// normalize makes a value of Go types (what mutate set) into decoded JSON, numbers as
// json.Number so that every digit goes out as it came in.
func normalize(v map[string]any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the object: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out map[string]any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// jsonEqual compares two values as their JSON: 3, 3.0 and json.Number("3") are equal, and so
// are a map[string]string and the map[string]any of its JSON.
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// mutateOrCreate gets obj into obj; if it does not exist it creates it after mutate and returns
// what create did, with before nil; else it runs mutate on it and returns it as it was before.
func mutateOrCreate(ctx context.Context, c *wasmrec.Client, obj *wasmrec.Object, mutate MutateFn) (before *wasmrec.Object, created OperationResult, err error) {
	ref := obj.Ref()
	exists, err := get(ctx, c, obj)
	if err != nil {
		return nil, OperationResultNone, err
	}
	if !exists {
		res, err := create(ctx, c, obj, ref, mutate)
		return nil, res, err
	}
	before = obj.DeepCopy()
	if err := callMutate(mutate, ref, obj); err != nil {
		return nil, OperationResultNone, err
	}
	return before, OperationResultNone, nil
}
