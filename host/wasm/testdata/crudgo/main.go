// Command crudgo is a test guest that walks every host call against the real API server, for
// ConfigMaps labelled wasmrec.dev/crud: create (and create again: already exists), update (and
// update with a stale resourceVersion: conflict), list, update_status of the App named in the
// ConfigMap's data, delete (and delete again: not found), an event, and a line on stdout. It
// logs "crud: all steps passed", or returns the step that failed.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	wasmrec.Register(wasmrec.Manifest{
		Name: "crud",
		For: wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap", Predicates: []wasmrec.Predicate{{
			Type: "LabelSelector", Selector: &wasmrec.LabelSelector{MatchLabels: map[string]string{"wasmrec.dev/crud": "yes"}},
		}}},
		Permissions: []wasmrec.Permission{
			{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
			{Group: "demo.wasmrec.dev", Resources: []string{"apps"}, Verbs: []string{"get", "list", "watch"}},
			{Group: "demo.wasmrec.dev", Resources: []string{"apps/status"}, Verbs: []string{"update"}},
			{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}},
		},
	}, wasmrec.ReconcilerFunc(reconcile))
}

func main() {}

func reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	c := wasmrec.NewClient()
	cm, err := c.Get(ctx, "v1", "ConfigMap", req.Namespace, req.Name)
	if wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, nil
	}
	if err != nil {
		return wasmrec.Result{}, fmt.Errorf("get: %w", err)
	}
	fmt.Println("crud: hello from stdout")

	child := wasmrec.NewObject("v1", "ConfigMap", req.Namespace, req.Name+"-child")
	child.SetNested(map[string]any{"step": "created"}, "data")
	child.SetNested(map[string]any{"wasmrec.dev/crud-child": "yes"}, "metadata", "labels")
	created, err := c.Create(ctx, child)
	if err != nil {
		return wasmrec.Result{}, fmt.Errorf("create: %w", err)
	}
	if _, err := c.Create(ctx, child); !wasmrec.IsAlreadyExists(err) {
		return wasmrec.Result{}, fmt.Errorf("create again: want already exists, got %v", err)
	}

	updated := &wasmrec.Object{Object: created.Object}
	updated.SetNested("updated", "data", "step")
	if _, err := c.Update(ctx, updated); err != nil {
		return wasmrec.Result{}, fmt.Errorf("update: %w", err)
	}
	if _, err := c.Update(ctx, created); !wasmrec.IsConflict(err) { // created holds the old resourceVersion
		return wasmrec.Result{}, fmt.Errorf("update with a stale resourceVersion: want conflict, got %v", err)
	}

	if _, err := c.List(ctx, "v1", "ConfigMap", req.Namespace, "wasmrec.dev/crud-child=yes"); err != nil {
		return wasmrec.Result{}, fmt.Errorf("list: %w", err)
	}

	appName, _ := cm.NestedString("data", "app")
	app, err := c.Get(ctx, "demo.wasmrec.dev/v1", "App", req.Namespace, appName)
	if err != nil {
		return wasmrec.Result{}, fmt.Errorf("get app %q: %w", appName, err)
	}
	app.SetNested("updated by crud", "status", "configMap") // a field the App schema keeps
	if _, err := c.Status().Update(ctx, app); err != nil {
		return wasmrec.Result{}, fmt.Errorf("update status: %w", err)
	}

	if err := c.Delete(ctx, child.Ref(), wasmrec.DeleteOptions{}); err != nil {
		return wasmrec.Result{}, fmt.Errorf("delete: %w", err)
	}
	if err := c.Delete(ctx, child.Ref(), wasmrec.DeleteOptions{}); !wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, fmt.Errorf("delete again: want not found, got %v", err)
	}
	// A delete without a name is refused, never sent as a delete of the whole collection.
	var se *wasmrec.StatusError
	if err := c.Delete(ctx, wasmrec.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: req.Namespace}, wasmrec.DeleteOptions{}); !errors.As(err, &se) || se.Status != abi.StatusBadRequest {
		return wasmrec.Result{}, fmt.Errorf("delete without a name: want bad request, got %v", err)
	}
	// An event about an object without a name is refused too.
	if err := c.EventFor(ctx, wasmrec.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: req.Namespace}, "Normal", "Nameless", "no"); !errors.As(err, &se) || se.Status != abi.StatusBadRequest {
		return wasmrec.Result{}, fmt.Errorf("event about an object without a name: want bad request, got %v", err)
	}
	if err := c.Event(ctx, "Normal", "CrudDone", "every host call answered as expected"); err != nil {
		return wasmrec.Result{}, fmt.Errorf("event: %w", err)
	}
	wasmrec.Log.Info("crud: all steps passed", "configmap", req)
	return wasmrec.Result{}, nil
}
