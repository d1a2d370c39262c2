package guest

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/wasmrec/wasmrec/host/object"
)

// protobufObject is an object's answer to a get asking for protobuf, or nil, false to answer
// its JSON (object.ProtobufOf says when).
func protobufObject(gvk schema.GroupVersionKind, o *object.Object) ([]byte, bool) {
	return o.Protobuf(gvk)
}

// protobufList is a list's answer asking for protobuf: gvk's List type holding items, in
// order; nil, false to answer JSON (no List type, an item the types do not hold whole).
func protobufList(gvk schema.GroupVersionKind, items []*object.Object) ([]byte, bool) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	list, err := scheme.Scheme.New(listGVK)
	if err != nil || !meta.IsListType(list) {
		return nil, false
	}
	objs := make([]runtime.Object, len(items))
	for i, it := range items {
		obj, ok := object.Typed(gvk, it.Raw)
		if !ok {
			return nil, false
		}
		objs[i] = obj
	}
	if err := meta.SetList(list, objs); err != nil {
		return nil, false
	}
	list.GetObjectKind().SetGroupVersionKind(listGVK)
	return object.EncodeProtobuf(list)
}
