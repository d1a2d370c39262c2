package types

// UID is an object's unique id, given by the API server.
type UID string

// NamespacedName names an object in a namespace (Namespace empty for a cluster-scoped one).
type NamespacedName struct {
	Namespace string
	Name      string
}

// String is namespace/name, or name for a cluster-scoped object.
func (n NamespacedName) String() string {
	if n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "/" + n.Name
}

// PatchType is a patch's content type, as the API server takes it.
type PatchType string

const (
	JSONPatchType           PatchType = "application/json-patch+json"
	MergePatchType          PatchType = "application/merge-patch+json"
	StrategicMergePatchType PatchType = "application/strategic-merge-patch+json"
	ApplyPatchType          PatchType = "application/apply-patch+yaml"
	ApplyCBORPatchType      PatchType = "application/apply-patch+cbor"
)
