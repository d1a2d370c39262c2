// Command benchgo is the Go guest of the benchmarks. By request name: "noop" returns at once;
// "deployment" gets a Deployment from the host and decodes it into appsv1.Deployment;
// "deployment-fields" decodes only spec.replicas and the first container's image, into a struct
// of those fields. It imports k8s.io/api, so it is also the large (~17 MB) module of the
// cold-start benchmark.
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
		switch req.Name {
		case "deployment":
			var d appsv1.Deployment
			if err := client.GetInto(ctx, "apps/v1", "Deployment", req.Namespace, req.Name, &d); err != nil {
				return wasmrec.Result{}, err
			}
			if len(d.Spec.Template.Spec.Containers) == 0 {
				return wasmrec.Result{}, fmt.Errorf("decoded no containers")
			}
		case "deployment-fields":
			var d DeploymentFields
			if err := client.GetInto(ctx, "apps/v1", "Deployment", req.Namespace, "deployment", &d); err != nil {
				return wasmrec.Result{}, err
			}
			if d.Spec.Replicas != 3 || len(d.Spec.Template.Spec.Containers) == 0 || d.Spec.Template.Spec.Containers[0].Image == "" {
				return wasmrec.Result{}, fmt.Errorf("decoded %+v", d)
			}
		}
		return wasmrec.Result{}, nil
	}))
}

// DeploymentFields is the part of a Deployment "deployment-fields" reads.
type DeploymentFields struct {
	Spec struct {
		Replicas int32 `json:"replicas"`
		Template struct {
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func main() {}
