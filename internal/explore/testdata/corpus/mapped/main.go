// Command mapped copies data.value of the ConfigMap a Widget names in spec.config into the
// Widget's status.value, and watches ConfigMaps with a map function. The map enqueues the
// Widget named as the ConfigMap, as if every Widget's ConfigMap shared its name: a change to
// a ConfigMap of another name reaches no Widget until something else enqueues it. The twin's map
// lists the Widgets of the namespace and enqueues those whose spec.config names the ConfigMap.
package main

import (
	"context"

	"github.com/wasmrec/wasmrec/internal/explore/testdata/corpus/widget"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	r := &reconciler{wasmrec.NewClient()}
	m := widget.Manifest("mapped")
	m.Owns = nil
	m.Watches = []wasmrec.Watch{wasmrec.MapWatch("v1", "ConfigMap", r.widgetsUsing)}
	wasmrec.Register(m, r)
}

func main() {}

type reconciler struct{ client *wasmrec.Client }

func (r *reconciler) widgetsUsing(ctx context.Context, cm *wasmrec.Object) []wasmrec.Request {
	if !widget.IsFixed() {
		return []wasmrec.Request{wasmrec.NewRequest(cm.Namespace(), cm.Name())}
	}
	ws, err := r.client.List(ctx, widget.APIVersion, widget.Kind, cm.Namespace(), "")
	if err != nil {
		wasmrec.Log.Error(err, "listing the Widgets")
		return nil
	}
	var reqs []wasmrec.Request
	for _, w := range ws {
		if name, _ := w.NestedString("spec", "config"); name == cm.Name() {
			reqs = append(reqs, wasmrec.NewRequest(w.Namespace(), w.Name()))
		}
	}
	return reqs
}

func (r *reconciler) Reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	w, err := r.client.Get(ctx, widget.APIVersion, widget.Kind, req.Namespace, req.Name)
	if wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, nil
	}
	if err != nil {
		return wasmrec.Result{}, err
	}
	name, _ := w.NestedString("spec", "config")
	value := ""
	if name != "" {
		cm, err := r.client.Get(ctx, "v1", "ConfigMap", req.Namespace, name)
		switch {
		case wasmrec.IsNotFound(err):
		case err != nil:
			return wasmrec.Result{}, err
		default:
			value, _ = cm.NestedString("data", "value")
		}
	}
	if got, _ := w.NestedString("status", "value"); got == value {
		return wasmrec.Result{}, nil
	}
	return wasmrec.Result{}, widget.PatchStatus(ctx, r.client, w, map[string]any{"value": value})
}
