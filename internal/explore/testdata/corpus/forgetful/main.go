// Command forgetful creates a Widget's child ConfigMap, remembers in its memory that the Widget
// waits for it, and marks the Widget Ready when the child's event comes. A restart between the
// two events forgets the wait, and the Widget is never marked. The twin decides from the
// cluster: a child there and a Widget not Ready.
package main

import (
	"context"

	"github.com/wasmrec/wasmrec/internal/explore/testdata/corpus/widget"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	wasmrec.Register(widget.Manifest("forgetful"), &reconciler{client: wasmrec.NewClient(), waiting: map[string]bool{}})
}

func main() {}

type reconciler struct {
	client  *wasmrec.Client
	waiting map[string]bool // Widgets whose child was created, by namespace/name
}

func (r *reconciler) Reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	w, err := r.client.Get(ctx, widget.APIVersion, widget.Kind, req.Namespace, req.Name)
	if wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, nil
	}
	if err != nil {
		return wasmrec.Result{}, err
	}
	id := req.Namespace + "/" + req.Name
	name := req.Name + "-data"
	_, err = r.client.Get(ctx, "v1", "ConfigMap", req.Namespace, name)
	switch {
	case wasmrec.IsNotFound(err):
		if _, err := r.client.Create(ctx, widget.Child(w, name, map[string]any{"size": "1"})); err != nil {
			return wasmrec.Result{}, err
		}
		r.waiting[id] = true
		return wasmrec.Result{}, nil
	case err != nil:
		return wasmrec.Result{}, err
	}
	phase, _ := w.NestedString("status", "phase")
	if phase != "Ready" && (r.waiting[id] || widget.IsFixed()) {
		delete(r.waiting, id)
		return wasmrec.Result{}, widget.PatchStatus(ctx, r.client, w, map[string]any{"phase": "Ready"})
	}
	return wasmrec.Result{}, nil
}
