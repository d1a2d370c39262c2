// Command benchgo is the Go guest of the benchmarks. By request name: "noop" returns at once;
// "deployment" (and "deployment-hostconvert") gets a Deployment from the host and decodes it into
// appsv1.Deployment, in protobuf where the host answers it; "deployment-json" the same from
// JSON; "deployment-object" gets it as an untyped Object (Client.Get), "deployment-object-std"
// as a map[string]any decoded by encoding/json;
// "deployment-generated" gets it with package client into the generated appsv1.Deployment of
// sdk/go/k8s (JSON, decoded without reflection); "deployment-raw" gets its JSON and decodes
// nothing, the floor of the others;
// "deployment-fields" decodes only spec.replicas and the first container's image, into a struct
// of those fields. It imports k8s.io/api, so it is also the large (~17 MB) module of the
// cold-start benchmark.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	genappsv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/apps/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

func init() {
	client, typed := wasmrec.NewClient(), client.New()
	wasmrec.Register(wasmrec.Manifest{
		Name:        "bench-go",
		For:         wasmrec.Watch{APIVersion: "apps/v1", Kind: "Deployment"},
		Permissions: []wasmrec.Permission{{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}}},
	}, wasmrec.ReconcilerFunc(func(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		switch req.Name {
		case "deployment", "deployment-hostconvert", "deployment-json":
			var d appsv1.Deployment
			var into any = &d // protobuf: appsv1.Deployment has the generated methods
			if req.Name == "deployment-json" {
				into = &jsonOnly{&d}
			}
			if err := client.GetInto(ctx, "apps/v1", "Deployment", req.Namespace, "deployment", into); err != nil {
				return wasmrec.Result{}, err
			}
			if len(d.Spec.Template.Spec.Containers) == 0 || d.Kind != "Deployment" {
				return wasmrec.Result{}, fmt.Errorf("decoded %+v", d)
			}
		case "deployment-generated":
			var d genappsv1.Deployment
			if err := typed.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: "deployment"}, &d); err != nil {
				return wasmrec.Result{}, err
			}
			if len(d.Spec.Template.Spec.Containers) == 0 || d.Kind != "Deployment" {
				return wasmrec.Result{}, fmt.Errorf("decoded %+v", d)
			}
		case "deployment-raw":
			b, err := client.Raw(ctx, "get", []byte(`{"apiVersion":"apps/v1","kind":"Deployment","namespace":"bench","name":"deployment"}`))
			if err != nil || len(b) == 0 {
				return wasmrec.Result{}, fmt.Errorf("got %d bytes: %v", len(b), err)
			}
		case "deployment-object":
			o, err := client.Get(ctx, "apps/v1", "Deployment", req.Namespace, "deployment")
			if err != nil {
				return wasmrec.Result{}, err
			}
			if _, ok := o.NestedSlice("spec", "template", "spec", "containers"); !ok {
				return wasmrec.Result{}, fmt.Errorf("decoded no containers")
			}
		case "deployment-object-std":
			var o map[string]any // GetInto decodes a map with encoding/json
			if err := client.GetInto(ctx, "apps/v1", "Deployment", req.Namespace, "deployment", &o); err != nil {
				return wasmrec.Result{}, err
			}
			if o["spec"] == nil {
				return wasmrec.Result{}, fmt.Errorf("decoded no spec")
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

// jsonOnly decodes into a typed object from JSON: without the protobuf methods, GetInto asks
// for JSON.
type jsonOnly struct{ v any }

func (j *jsonOnly) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, j.v) }

func main() {}
