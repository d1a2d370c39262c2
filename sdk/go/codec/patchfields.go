package codec

// PatchFields is what a strategic merge patch knows of a generated type: how each of its JSON
// members merges. The Kubernetes types under sdk/go/k8s have it, from k8s.io/api's
// patchStrategy and patchMergeKey tags. A plugin's own types do not: the API server takes no
// strategic merge patch of a custom resource.
type PatchFields interface {
	// PatchField says of the JSON member name whose value is an object or an array: its patch
	// strategy ("merge", "retainKeys", "merge,retainKeys", or "" to replace a list whole), a
	// list's merge key ("" for a list of strings or numbers), and the PatchFields of the value's
	// type (of a list's items), nil where that is not a generated struct. ok is false for a
	// member the type does not have, and for one whose value is a string, number or bool.
	PatchField(name string) (strategy, mergeKey string, value PatchFields, ok bool)
}
