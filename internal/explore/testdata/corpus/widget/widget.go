// Package widget is what the plugins of the exploration corpus share: the Widget kind they
// reconcile, its child ConfigMaps, and whether a plugin is built as its correct twin.
package widget

import (
	"context"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// Fixed is "true" in a correct twin's build (-ldflags=-X=...widget.Fixed=true).
var Fixed string

// IsFixed reports whether this build is the correct twin.
func IsFixed() bool { return Fixed == "true" }

// APIVersion and Kind of the Widget, a custom resource with a status subresource.
const (
	APIVersion = "corpus.wasmrec.dev/v1"
	Kind       = "Widget"
)

// Manifest is a plugin of Widgets that owns ConfigMaps.
func Manifest(name string, predicates ...wasmrec.Predicate) wasmrec.Manifest {
	return wasmrec.Manifest{
		Name: name,
		For:  wasmrec.Watch{APIVersion: APIVersion, Kind: Kind, Predicates: predicates},
		Owns: []wasmrec.Watch{{APIVersion: "v1", Kind: "ConfigMap"}},
		Permissions: []wasmrec.Permission{
			{Group: "corpus.wasmrec.dev", Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}},
			{Group: "corpus.wasmrec.dev", Resources: []string{"widgets/status"}, Verbs: []string{"patch"}},
			{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		},
	}
}

// Child is a ConfigMap owned by w, with data.
func Child(w *wasmrec.Object, name string, data map[string]any) *wasmrec.Object {
	cm := wasmrec.NewObject("v1", "ConfigMap", w.Namespace(), name)
	cm.SetNested(map[string]any{"widget": w.Name()}, "metadata", "labels")
	cm.SetNested(data, "data")
	_ = cm.SetControllerOwner(w)
	return cm
}

// ControllerUID is the uid of o's controller owner, "" if none.
func ControllerUID(o *wasmrec.Object) string {
	refs, _ := o.NestedSlice("metadata", "ownerReferences")
	for _, r := range refs {
		if m, ok := r.(map[string]any); ok && m["controller"] == true {
			uid, _ := m["uid"].(string)
			return uid
		}
	}
	return ""
}

// PatchStatus merges status into w's status.
func PatchStatus(ctx context.Context, c *wasmrec.Client, w *wasmrec.Object, status map[string]any) error {
	_, err := c.Status().Patch(ctx, w.Ref(), wasmrec.PatchMerge, map[string]any{"status": status})
	return err
}
