package controllerutil

import (
	"slices"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// AddFinalizer adds finalizer to object's metadata.finalizers if it is not there, and reports
// whether it changed the list.
func AddFinalizer(object *wasmrec.Object, finalizer string) (finalizersUpdated bool) {
	fs := finalizers(object)
	if slices.Contains(fs, finalizer) {
		return false
	}
	return setFinalizers(object, append(fs, finalizer))
}

// RemoveFinalizer removes every occurrence of finalizer from object's metadata.finalizers, and
// reports whether it changed the list. A list left empty is removed.
func RemoveFinalizer(object *wasmrec.Object, finalizer string) (finalizersUpdated bool) {
	fs := finalizers(object)
	kept := slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == finalizer })
	if len(kept) == len(fs) {
		return false
	}
	return setFinalizers(object, kept)
}

// ContainsFinalizer reports whether finalizer is in object's metadata.finalizers.
func ContainsFinalizer(object *wasmrec.Object, finalizer string) bool {
	return slices.Contains(finalizers(object), finalizer)
}

func finalizers(object *wasmrec.Object) []string {
	v, _ := object.Nested("metadata", "finalizers")
	var out []string
	switch v := v.(type) {
	case []any:
		for _, f := range v {
			if s, ok := f.(string); ok {
				out = append(out, s)
			}
		}
	case []string: // set by the plugin with SetNested
		out = slices.Clone(v)
	}
	return out
}

// setFinalizers sets metadata.finalizers, or removes it if fs is empty; false if metadata is
// not an object.
func setFinalizers(object *wasmrec.Object, fs []string) bool {
	if len(fs) == 0 {
		md, ok := object.NestedMap("metadata")
		delete(md, "finalizers")
		return ok
	}
	list := make([]any, len(fs))
	for i, f := range fs {
		list[i] = f
	}
	return object.SetNested(list, "metadata", "finalizers") == nil
}
