package v1

import (
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime/schema"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

// Object is what every kind's metadata gives, through its embedded ObjectMeta: the accessors
// of k8s.io/apimachinery's metav1.Object.
type Object interface {
	GetNamespace() string
	SetNamespace(namespace string)
	GetName() string
	SetName(name string)
	GetGenerateName() string
	SetGenerateName(name string)
	GetUID() types.UID
	SetUID(uid types.UID)
	GetResourceVersion() string
	SetResourceVersion(version string)
	GetGeneration() int64
	SetGeneration(generation int64)
	GetCreationTimestamp() Time
	SetCreationTimestamp(timestamp Time)
	GetDeletionTimestamp() *Time
	SetDeletionTimestamp(timestamp *Time)
	GetLabels() map[string]string
	SetLabels(labels map[string]string)
	GetAnnotations() map[string]string
	SetAnnotations(annotations map[string]string)
	GetFinalizers() []string
	SetFinalizers(finalizers []string)
	GetOwnerReferences() []OwnerReference
	SetOwnerReferences([]OwnerReference)
	GetManagedFields() []ManagedFieldsEntry
	SetManagedFields(managedFields []ManagedFieldsEntry)
}

var _ Object = (*ObjectMeta)(nil)

// GetObjectMeta is m, as an Object.
func (m *ObjectMeta) GetObjectMeta() Object { return m }

func (m *ObjectMeta) GetNamespace() string               { return m.Namespace }
func (m *ObjectMeta) SetNamespace(namespace string)      { m.Namespace = namespace }
func (m *ObjectMeta) GetName() string                    { return m.Name }
func (m *ObjectMeta) SetName(name string)                { m.Name = name }
func (m *ObjectMeta) GetGenerateName() string            { return m.GenerateName }
func (m *ObjectMeta) SetGenerateName(name string)        { m.GenerateName = name }
func (m *ObjectMeta) GetUID() types.UID                  { return m.UID }
func (m *ObjectMeta) SetUID(uid types.UID)               { m.UID = uid }
func (m *ObjectMeta) GetResourceVersion() string         { return m.ResourceVersion }
func (m *ObjectMeta) SetResourceVersion(version string)  { m.ResourceVersion = version }
func (m *ObjectMeta) GetGeneration() int64               { return m.Generation }
func (m *ObjectMeta) SetGeneration(generation int64)     { m.Generation = generation }
func (m *ObjectMeta) GetCreationTimestamp() Time         { return m.CreationTimestamp }
func (m *ObjectMeta) SetCreationTimestamp(t Time)        { m.CreationTimestamp = t }
func (m *ObjectMeta) GetDeletionTimestamp() *Time        { return m.DeletionTimestamp }
func (m *ObjectMeta) SetDeletionTimestamp(t *Time)       { m.DeletionTimestamp = t }
func (m *ObjectMeta) GetLabels() map[string]string       { return m.Labels }
func (m *ObjectMeta) SetLabels(labels map[string]string) { m.Labels = labels }
func (m *ObjectMeta) GetAnnotations() map[string]string  { return m.Annotations }
func (m *ObjectMeta) SetAnnotations(a map[string]string) { m.Annotations = a }
func (m *ObjectMeta) GetFinalizers() []string            { return m.Finalizers }
func (m *ObjectMeta) SetFinalizers(finalizers []string)  { m.Finalizers = finalizers }
func (m *ObjectMeta) GetOwnerReferences() []OwnerReference {
	return m.OwnerReferences
}
func (m *ObjectMeta) SetOwnerReferences(refs []OwnerReference) { m.OwnerReferences = refs }
func (m *ObjectMeta) GetManagedFields() []ManagedFieldsEntry   { return m.ManagedFields }
func (m *ObjectMeta) SetManagedFields(f []ManagedFieldsEntry)  { m.ManagedFields = f }

// GetResourceVersion is the list's resourceVersion.
func (m *ListMeta) GetResourceVersion() string { return m.ResourceVersion }

// SetResourceVersion sets the list's resourceVersion.
func (m *ListMeta) SetResourceVersion(version string) { m.ResourceVersion = version }

// GetContinue is the token of the list's next page.
func (m *ListMeta) GetContinue() string { return m.Continue }

// GetAPIVersion is the object's apiVersion as it was read or set ("" until then).
func (t *TypeMeta) GetAPIVersion() string { return t.APIVersion }

// GetKind is the object's kind as it was read or set ("" until then).
func (t *TypeMeta) GetKind() string { return t.Kind }

// SetAPIVersionKind sets apiVersion and kind.
func (t *TypeMeta) SetAPIVersionKind(apiVersion, kind string) {
	t.APIVersion, t.Kind = apiVersion, kind
}

// NewControllerRef is an ownerReference to owner, of the kind gvk (appsv1.SchemeGroupVersion.
// WithKind("Deployment")), that marks it the controller of the object holding it, and blocks that
// object's deletion in the foreground until owner is gone.
func NewControllerRef(owner Object, gvk schema.GroupVersionKind) *OwnerReference {
	yes := true
	return &OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// GetControllerOf is obj's ownerReference that marks its controller, or nil.
func GetControllerOf(obj Object) *OwnerReference {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return &ref
		}
	}
	return nil
}

// IsControlledBy reports whether owner is obj's controller.
func IsControlledBy(obj Object, owner Object) bool {
	ref := GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID()
}
