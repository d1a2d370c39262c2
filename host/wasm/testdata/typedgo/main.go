// Command typedgo is the typed Go guest of host/wasm's BenchmarkReconcile: a module as a typed
// plugin builds it, with sdk/go and its generated Kubernetes types and none of k8s.io (bench-go,
// the other Go guest, imports k8s.io/api, whose package state the guest's collector then scans
// as well). Its works, named by the request: "noop", nothing; "deployment-raw", the get of a
// Deployment and nothing decoded; "deployment-generated", the get decoded into the generated
// appsv1.Deployment through package client.
package main

import (
	"context"
	"fmt"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	appsv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/apps/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

func init() {
	raw, typed := wasmrec.NewClient(), client.New()
	wasmrec.Register(wasmrec.Manifest{
		Name:        "typed-go",
		For:         wasmrec.Watch{APIVersion: "apps/v1", Kind: "Deployment"},
		Permissions: []wasmrec.Permission{{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}}},
	}, wasmrec.ReconcilerFunc(func(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		switch req.Name {
		case "noop":
		case "deployment-raw":
			b, err := raw.Raw(ctx, "get", []byte(`{"apiVersion":"apps/v1","kind":"Deployment","namespace":"bench","name":"deployment"}`))
			if err != nil || len(b) == 0 {
				return wasmrec.Result{}, fmt.Errorf("got %d bytes: %v", len(b), err)
			}
		case "deployment-generated":
			var d appsv1.Deployment
			if err := typed.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: "deployment"}, &d); err != nil {
				return wasmrec.Result{}, err
			}
			if len(d.Spec.Template.Spec.Containers) == 0 || d.Kind != "Deployment" {
				return wasmrec.Result{}, fmt.Errorf("decoded %+v", d)
			}
		default:
			return wasmrec.Result{}, fmt.Errorf("typed-go has no work %q", req.Name)
		}
		return wasmrec.Result{}, nil
	}))
}

func main() {}
