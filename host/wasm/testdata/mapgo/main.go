// Command mapgo is a test guest that reconciles Secrets, and whose map function does what a
// watched ConfigMap's data says: "targets" lists what to enqueue, comma-separated: "name" in
// the object's namespace, "ns/name", or "/name" with no namespace;
// "get" names a ConfigMap to read first, whose resourceVersion becomes a target; "write" makes
// it try a create, whose status becomes a target; "panic" panics; "spin" loops for ever;
// "none" returns no request. It counts the objects it mapped in its heap, and a reconcile of a
// name starting "report" returns that count as its error, so a replay of it must run the maps
// before it; other reconciles succeed.
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
		For:  wasmrec.Watch{APIVersion: "v1", Kind: "Secret"},
		Watches: []wasmrec.Watch{
			{APIVersion: "v1", Kind: "Namespace", Map: wasmrec.MapNamespace},
			wasmrec.MapWatch("v1", "ConfigMap", mapConfigMap),
		},
		Permissions: []wasmrec.Permission{
			{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create"}},
			{Group: "", Resources: []string{"secrets", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
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
			for _, t := range strings.Split(s, ",") {
				ns, name, ok := strings.Cut(t, "/")
				if !ok {
					ns, name = cm.Namespace(), t
				}
				reqs = append(reqs, wasmrec.NewRequest(ns, name))
			}
		}
	}
	return reqs
}

func reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	if strings.HasPrefix(req.Name, "report") {
		return wasmrec.Result{}, fmt.Errorf("%d objects mapped before %s", mapped, req.Name)
	}
	return wasmrec.Result{}, nil
}
