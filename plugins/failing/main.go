// Command failing is a wasmrec plugin whose reconcile always fails, so the host's retry
// schedule (5 ms, 10 ms, 20 ms, ... per key, capped at 1000 s) can be watched live. It
// reconciles ConfigMaps labelled wasmrec.dev/demo=always-fails.
package main

import (
	"context"
	"fmt"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	wasmrec.Register(wasmrec.Manifest{
		Name: "failing",
		For: wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap", Predicates: []wasmrec.Predicate{{
			Type:     wasmrec.PredicateLabelSelector,
			Selector: &wasmrec.LabelSelector{MatchLabels: map[string]string{"wasmrec.dev/demo": "always-fails"}},
		}}},
		Permissions: []wasmrec.Permission{{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}},
	}, wasmrec.ReconcilerFunc(func(_ context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		return wasmrec.Result{}, fmt.Errorf("failing on purpose (attempt %d for %s)", req.Retries+1, req)
	}))
}

func main() {}
