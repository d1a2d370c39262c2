// A plugin whose permissions come from its kubebuilder RBAC markers, as a ported controller's do.
package main

import (
	"context"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"

	"example.com/cronjob/internal/controller"
)

// Manifest asks for Events itself; the markers ask for the rest.
var Manifest = wasmrec.Manifest{
	Name:        "cronjob",
	For:         wasmrec.Watch{APIVersion: "batch.tutorial.kubebuilder.io/v1", Kind: "CronJob"},
	Permissions: []wasmrec.Permission{{Group: "", Resources: []string{"events"}, Verbs: []string{"create", "patch"}}},
}

func init() {
	wasmrec.Register(Manifest, wasmrec.ReconcilerFunc(func(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		return controller.Reconcile(ctx, req)
	}))
}

func main() {}
