// Command app is a wasmrec plugin that runs App objects (demo.wasmrec.dev/v1): for each it
// server-side applies a ConfigMap holding spec.message and a Service on spec.port, both owned by
// the App, and reports them in the App's status with a Ready condition and observedGeneration.
package main

import (
	"context"
	"fmt"
	"time"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

const appAPIVersion = "demo.wasmrec.dev/v1"

func init() {
	wasmrec.Register(wasmrec.Manifest{
		Name: "app",
		For:  wasmrec.Watch{APIVersion: appAPIVersion, Kind: "App", Predicates: []wasmrec.Predicate{{Type: wasmrec.PredicateGenerationChanged}}},
		Owns: []wasmrec.Watch{{APIVersion: "v1", Kind: "ConfigMap"}, {APIVersion: "v1", Kind: "Service"}},
		Permissions: []wasmrec.Permission{
			{Group: "demo.wasmrec.dev", Resources: []string{"apps"}, Verbs: []string{"get", "list", "watch"}},
			{Group: "demo.wasmrec.dev", Resources: []string{"apps/status"}, Verbs: []string{"patch"}},
			{Group: "", Resources: []string{"configmaps", "services"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}},
		},
	}, &reconciler{client: wasmrec.NewClient()})
}

func main() {}

type reconciler struct{ client *wasmrec.Client }

func (r *reconciler) Reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	app, err := r.client.Get(ctx, appAPIVersion, "App", req.Namespace, req.Name)
	if wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, nil // deleted: its children go with it
	}
	if err != nil {
		return wasmrec.Result{}, err
	}
	message, _ := app.NestedString("spec", "message")
	port, ok := app.NestedInt64("spec", "port")
	if !ok {
		port = 80
	}
	if port < 1 || port > 65535 {
		_ = r.client.Event(ctx, "Warning", "InvalidPort", fmt.Sprintf("spec.port %d is not a port", port))
		return wasmrec.Result{}, wasmrec.TerminalError(fmt.Errorf("spec.port %d is outside 1-65535", port))
	}

	cm := wasmrec.NewObject("v1", "ConfigMap", req.Namespace, req.Name)
	cm.SetNested(map[string]any{"message": message}, "data")
	if err := r.applyOwned(ctx, cm, app); err != nil {
		return wasmrec.Result{}, err
	}
	svc := wasmrec.NewObject("v1", "Service", req.Namespace, req.Name)
	svc.SetNested(map[string]any{
		"selector": map[string]any{"app": req.Name},
		"ports":    []any{map[string]any{"name": "http", "port": port, "protocol": "TCP"}},
	}, "spec")
	if err := r.applyOwned(ctx, svc, app); err != nil {
		return wasmrec.Result{}, err
	}

	gen := app.Generation()
	if observed, _ := app.NestedInt64("status", "observedGeneration"); observed == gen {
		return wasmrec.Result{}, nil
	}
	status := wasmrec.NewObject(appAPIVersion, "App", req.Namespace, req.Name)
	status.SetNested(map[string]any{
		"observedGeneration": gen,
		"configMap":          req.Name,
		"service":            req.Name,
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "ChildrenApplied",
			"message":            "configmap and service " + req.Name + " are applied",
			"observedGeneration": gen,
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		}},
	}, "status")
	if _, err := r.client.Status().Apply(ctx, status, true); err != nil {
		return wasmrec.Result{}, err
	}
	wasmrec.Log.Info("reconciled", "app", req, "generation", gen, "port", port)
	return wasmrec.Result{}, nil
}

func (r *reconciler) applyOwned(ctx context.Context, obj, owner *wasmrec.Object) error {
	if err := obj.SetControllerOwner(owner); err != nil {
		return err
	}
	_, err := r.client.Apply(ctx, obj, true)
	return err
}
