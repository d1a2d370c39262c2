// Command loop stamps each Widget's status with the time of its latest reconcile. The stamp is
// a change of the Widget, whose event enqueues it again: it never settles. The twin stamps only
// a generation it has not seen, and its status writes do not enqueue the Widget.
package main

import (
	"context"
	"time"

	"github.com/wasmrec/wasmrec/internal/explore/testdata/corpus/widget"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	m := widget.Manifest("loop")
	if widget.IsFixed() {
		m = widget.Manifest("loop", wasmrec.Predicate{Type: wasmrec.PredicateGenerationChanged})
	}
	wasmrec.Register(m, &reconciler{wasmrec.NewClient()})
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
	if observed, _ := w.NestedInt64("status", "observedGeneration"); widget.IsFixed() && observed == w.Generation() {
		return wasmrec.Result{}, nil
	}
	return wasmrec.Result{}, widget.PatchStatus(ctx, r.client, w, map[string]any{
		"observedGeneration": w.Generation(),
		"lastReconciled":     time.Now().UTC().Format(time.RFC3339Nano),
	})
}
