// Command benchgo is the Go guest of the benchmarks. By request name: "noop" returns at once;
// "deployment" gets a Deployment from the host and decodes it into appsv1.Deployment. It
// imports k8s.io/api, so it is also the large (~17 MB) module of the cold-start benchmark.
package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	client := wasmrec.NewClient()
	wasmrec.Register(wasmrec.Manifest{
		Name:        "bench-go",
		For:         wasmrec.Watch{APIVersion: "apps/v1", Kind: "Deployment"},
		Permissions: []wasmrec.Permission{{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}}},
	}, wasmrec.ReconcilerFunc(func(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		if req.Name != "deployment" {
			return wasmrec.Result{}, nil
		}
		var d appsv1.Deployment
		if err := client.GetInto(ctx, "apps/v1", "Deployment", req.Namespace, req.Name, &d); err != nil {
			return wasmrec.Result{}, err
		}
		if len(d.Spec.Template.Spec.Containers) == 0 {
			return wasmrec.Result{}, fmt.Errorf("decoded no containers")
		}
		return wasmrec.Result{}, nil
	}))
}

func main() {}
