// Command twice creates a Widget's child ConfigMap under a generated name and notes the name in
// the Widget's status, trusting the status to say whether the child exists. A crash between
// the create and the status write loses the note, and the restarted host creates a second
// child. The twin looks for the child by its label before it creates one.
package main

import (
	"context"

	"github.com/wasmrec/wasmrec/internal/explore/testdata/corpus/widget"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() { wasmrec.Register(widget.Manifest("twice"), &reconciler{wasmrec.NewClient()}) }

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
	if name, _ := w.NestedString("status", "child"); name != "" {
		return wasmrec.Result{}, nil
	}
	if widget.IsFixed() {
		children, err := r.client.List(ctx, "v1", "ConfigMap", req.Namespace, "widget="+req.Name)
		if err != nil {
			return wasmrec.Result{}, err
		}
		if len(children) > 0 {
			return wasmrec.Result{}, widget.PatchStatus(ctx, r.client, w, map[string]any{"child": children[0].Name()})
		}
	}
	child := widget.Child(w, "", map[string]any{"size": "1"})
	child.SetNested(req.Name+"-", "metadata", "generateName")
	created, err := r.client.Create(ctx, child)
	if err != nil {
		return wasmrec.Result{}, err
	}
	return wasmrec.Result{}, widget.PatchStatus(ctx, r.client, w, map[string]any{"child": created.Name()})
}
