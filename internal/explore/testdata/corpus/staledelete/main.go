// Command staledelete gives each Widget a child ConfigMap and marks the Widget Ready. A Widget
// not yet Ready that already has a child is taken to be a new Widget of an old one's name, and
// the child, left from the old one, is deleted. Read from a stale cache, a Ready Widget looks
// not yet Ready, and its own child is deleted and made again. The twin decides by the child's
// controller owner: a child of another Widget has another uid.
package main

import (
	"context"

	"github.com/wasmrec/wasmrec/internal/explore/testdata/corpus/widget"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() { wasmrec.Register(widget.Manifest("staledelete"), &reconciler{wasmrec.NewClient()}) }

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
	name := req.Name + "-data"
	child, err := r.client.Get(ctx, "v1", "ConfigMap", req.Namespace, name)
	if err != nil && !wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, err
	}
	ready, _ := w.NestedString("status", "phase")
	leftOver := child != nil && ready != "Ready"
	if widget.IsFixed() {
		leftOver = child != nil && widget.ControllerUID(child) != w.UID()
	}
	if leftOver {
		if err := r.client.Delete(ctx, child.Ref(), wasmrec.DeleteOptions{}); err != nil {
			return wasmrec.Result{}, err
		}
		child = nil
	}
	if child == nil {
		if _, err := r.client.Create(ctx, widget.Child(w, name, map[string]any{"size": "1"})); err != nil {
			return wasmrec.Result{}, err
		}
	}
	if ready != "Ready" {
		return wasmrec.Result{}, widget.PatchStatus(ctx, r.client, w, map[string]any{"phase": "Ready"})
	}
	return wasmrec.Result{}, nil
}
