// Command mapgo is a test guest whose map function does what the watched ConfigMap's data
// says: "targets" lists the names to enqueue (comma-separated, in the object's namespace);
// "get" names a ConfigMap to read first, whose resourceVersion becomes a target; "write" makes
// it try a create, whose status becomes a target; "panic" panics; "spin" loops for ever;
// "none" returns no request. It counts the objects it mapped in its heap, and each reconcile
// reports that count as its error, so a replay of a reconcile must run the maps before it.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	wasmrec.Register(wasmrec.Manifest{
		Name: "map",
		For:  wasmrec.Watch{APIVersion: "example.com/v1", Kind: "Widget"},
		Watches: []wasmrec.Watch{
			{APIVersion: "v1", Kind: "Secret", Map: wasmrec.MapSameName},
			wasmrec.MapWatch("v1", "ConfigMap", mapConfigMap),
		},
		Permissions: []wasmrec.Permission{
			{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create"}},
		},
	}, wasmrec.ReconcilerFunc(reconcile))
}

func main() {}

var mapped int

func mapConfigMap(ctx context.Context, cm *wasmrec.Object) []wasmrec.Request {
	mapped++
	data, _ := cm.NestedMap("data")
	c := wasmrec.NewClient()
	var reqs []wasmrec.Request
	for k, v := range data {
		s, _ := v.(string)
		switch k {
		case "panic":
			panic("told to panic: " + s)
		case "spin":
			for {
				mapped++
			}
		case "get":
			got, err := c.Get(ctx, "v1", "ConfigMap", cm.Namespace(), s)
			if err != nil {
				reqs = append(reqs, wasmrec.NewRequest(cm.Namespace(), "get-failed"))
			} else {
				reqs = append(reqs, wasmrec.NewRequest(cm.Namespace(), "rv-"+got.ResourceVersion()))
			}
		case "write":
			_, err := c.Create(ctx, wasmrec.NewObject("v1", "ConfigMap", cm.Namespace(), s))
			var se *wasmrec.StatusError
			if errors.As(err, &se) {
				reqs = append(reqs, wasmrec.NewRequest("", fmt.Sprintf("create-status-%d", se.Status)))
			} else {
				reqs = append(reqs, wasmrec.NewRequest("", "create-went-through"))
			}
		case "targets":
			for _, name := range strings.Split(s, ",") {
				reqs = append(reqs, wasmrec.NewRequest(cm.Namespace(), name))
			}
		}
	}
	return reqs
}

func reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	return wasmrec.Result{}, fmt.Errorf("%d objects mapped before %s", mapped, req.Name)
}
