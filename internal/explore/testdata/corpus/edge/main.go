// Command edge counts a Widget's resizes in its status, each time it sees spec.size differ
// from the size it saw last (kept in its memory). Two resizes seen as one, as a watch may
// deliver them, count once. The twin counts from the state: every change of spec moves
// metadata.generation on.
package main

import (
	"context"

	"github.com/wasmrec/wasmrec/internal/explore/testdata/corpus/widget"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	wasmrec.Register(widget.Manifest("edge", wasmrec.Predicate{Type: wasmrec.PredicateGenerationChanged}),
		&reconciler{client: wasmrec.NewClient(), seen: map[string]int64{}})
}

func main() {}

type reconciler struct {
	client *wasmrec.Client
	seen   map[string]int64 // the size each Widget had when last reconciled
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
	size, _ := w.NestedInt64("spec", "size")
	resizes, _ := w.NestedInt64("status", "resizes")
	want := resizes
	if widget.IsFixed() {
		want = w.Generation() - 1
	} else if last, ok := r.seen[id]; ok && last != size {
		want = resizes + 1
	}
	r.seen[id] = size
	if want == resizes {
		return wasmrec.Result{}, nil
	}
	return wasmrec.Result{}, widget.PatchStatus(ctx, r.client, w, map[string]any{"resizes": want})
}
