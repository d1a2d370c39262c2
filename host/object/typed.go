package object

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FromTyped makes an Object of a typed object of kind gvk, as an informer of a built-in kind
// decodes it from protobuf: its metadata, less managedFields and the last-applied annotation,
// and its JSON less managedFields, encoded once here so that a guest's get stays a copy. It takes
// obj's metadata: obj must not be used afterwards.
func FromTyped(obj runtime.Object, gvk schema.GroupVersionKind) (*Object, error) {
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, fmt.Errorf("object: %T has no object metadata", obj)
	}
	meta, ok := acc.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil, fmt.Errorf("object: %T's metadata is not an ObjectMeta", obj)
	}
	meta.ManagedFields = nil
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("object: encoding %s %s/%s: %w", gvk.Kind, meta.Namespace, meta.Name, err)
	}
	delete(meta.Annotations, LastApplied)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
	o := &Object{ObjectMeta: *meta, Raw: raw}
	o.SetGroupVersionKind(gvk)
	return o, nil
}
