// Command stalestatus keeps a Widget's child ConfigMap at the Widget's spec.size and, when it
// changes the child, reports the child's size in the Widget's status as it reads it back. Its
// status writes do not enqueue the Widget (GenerationChanged). Read from a stale cache, the
// child's old size goes into the status, and the next reconcile, finding the child right,
// leaves it there. The twin reports the size it wrote, and brings the status up to it in every
// reconcile, not only in those that change the child.
package main

import (
	"context"
	"fmt"

	"github.com/wasmrec/wasmrec/internal/explore/testdata/corpus/widget"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	wasmrec.Register(widget.Manifest("stalestatus", wasmrec.Predicate{Type: wasmrec.PredicateGenerationChanged}), &reconciler{wasmrec.NewClient()})
}

func main() {}

type reconciler struct{ client *wasmrec.Client }

func (r *reconciler) Reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	w, err := r.client.Get(ctx, widget.APIVersion, widget.Kind, req.Namespace, req.Name)
	if wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, nil
	}
	if err != nil {
		return wasmrec.Result{}, err
	}
	size, _ := w.NestedInt64("spec", "size")
	want := fmt.Sprint(size)
	name := req.Name + "-data"
	child, err := r.client.Get(ctx, "v1", "ConfigMap", req.Namespace, name)
	switch {
	case wasmrec.IsNotFound(err):
		if _, err := r.client.Create(ctx, widget.Child(w, name, map[string]any{"size": want})); err != nil {
			return wasmrec.Result{}, err
		}
	case err != nil:
		return wasmrec.Result{}, err
	default:
		if got, _ := child.NestedString("data", "size"); got == want {
			if widget.IsFixed() {
				break // the status may still be behind: a crash, or a conflict, came before it
			}
			return wasmrec.Result{}, nil // nothing changed
		}
		child.SetNested(want, "data", "size")
		if _, err := r.client.Update(ctx, child); err != nil {
			return wasmrec.Result{}, err
		}
	}
	// The status says what the child holds now.
	reported := want
	if !widget.IsFixed() {
		child, err := r.client.Get(ctx, "v1", "ConfigMap", req.Namespace, name)
		if err != nil {
			return wasmrec.Result{}, err
		}
		reported, _ = child.NestedString("data", "size")
	}
	if got, _ := w.NestedString("status", "size"); got == reported {
		return wasmrec.Result{}, nil
	}
	return wasmrec.Result{}, widget.PatchStatus(ctx, r.client, w, map[string]any{"size": reported})
}
