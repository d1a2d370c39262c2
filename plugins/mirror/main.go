// Command mirror is a wasmrec plugin that keeps a copy of each ConfigMap labelled
// wasmrec.dev/mirror: "true": a ConfigMap <name>-mirror in the same namespace with the same data
// and binaryData, controlled by the source. The garbage collector deletes the copy with its
// source, so no finalizer is needed; the plugin owns its copies, so a copy that is edited or
// deleted is put back. A <name>-mirror that another controller owns is left as it is, with a
// Warning Event; one that no controller owns is adopted, as controller-runtime's
// SetControllerReference does. Taking the label off leaves the copy until the source goes.
package main

import (
	"context"
	"errors"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/controllerutil"
)

const (
	// Label marks a ConfigMap to mirror, with the value "true".
	Label = "wasmrec.dev/mirror"
	// Suffix is added to the source's name to name its copy.
	Suffix = "-mirror"
)

// Manifest is the plugin's manifest.
var Manifest = wasmrec.Manifest{
	Name: "mirror",
	For: wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap", Predicates: []wasmrec.Predicate{{
		Type:     wasmrec.PredicateLabelSelector,
		Selector: &wasmrec.LabelSelector{MatchLabels: map[string]string{Label: "true"}},
	}}},
	Owns: []wasmrec.Watch{{APIVersion: "v1", Kind: "ConfigMap"}},
	Permissions: []wasmrec.Permission{
		{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
		{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}},
	},
}

func init() {
	wasmrec.Register(Manifest, &Reconciler{Client: wasmrec.NewClient()})
}

func main() {}

// Reconciler keeps the copy of one source ConfigMap.
type Reconciler struct{ Client *wasmrec.Client }

// Reconcile makes req's copy hold its data, controlled by it.
func (r *Reconciler) Reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	src, err := r.Client.Get(ctx, "v1", "ConfigMap", req.Namespace, req.Name)
	if wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, nil // deleted: the garbage collector deletes its copy
	}
	if err != nil || src.Labels()[Label] != "true" {
		return wasmrec.Result{}, err // unlabelled: an Owns event for a copy it made before
	}
	cp := wasmrec.NewObject("v1", "ConfigMap", req.Namespace, req.Name+Suffix)
	op, err := controllerutil.CreateOrPatch(ctx, r.Client, cp, func() error {
		for _, f := range []string{"data", "binaryData"} {
			if v, ok := src.Object[f]; ok {
				cp.Object[f] = v
			} else {
				delete(cp.Object, f)
			}
		}
		return controllerutil.SetControllerReference(src, cp)
	})
	var owned *controllerutil.AlreadyOwnedError
	if errors.As(err, &owned) {
		_ = r.Client.Event(ctx, "Warning", "CopyNameTaken", err.Error()) // the error says it too
		return wasmrec.Result{}, wasmrec.TerminalError(err)
	}
	if err == nil && op != controllerutil.OperationResultNone {
		wasmrec.Log.Info("mirrored", "configmap", req.String(), "copy", cp.Name(), "operation", string(op))
	}
	return wasmrec.Result{}, err
}
