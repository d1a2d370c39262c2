// Command recordgo is a test guest whose reconciles depend on all a replay must give back: it
// keeps a count of reconciles per object in its heap (state an instance carries from one
// reconcile to the next), draws from math/rand, reads both clocks, ranges over a Go map (whose
// order the runtime draws at random), and writes what it found into the data of a
// ConfigMap of its own, "<name>-out", applied server-side (the watched ConfigMap is left as it
// is: no reconcile starts another). It logs a line, prints one to stdout, records an event, and
// fails every fifth reconcile of an object. Built with -ldflags=-X main.version=2 it writes one
// more key.
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

var version = "1"

func init() {
	wasmrec.Register(wasmrec.Manifest{
		Name: "record",
		For: wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap", Predicates: []wasmrec.Predicate{{
			Type: "LabelSelector", Selector: &wasmrec.LabelSelector{MatchLabels: map[string]string{"wasmrec.dev/record": "yes"}},
		}}},
		Permissions: []wasmrec.Permission{
			{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
			{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}},
		},
	}, wasmrec.ReconcilerFunc(reconcile))
}

func main() {}

var seen = map[string]int{}

func reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	c := wasmrec.NewClient()
	cm, err := c.Get(ctx, "v1", "ConfigMap", req.Namespace, req.Name)
	if wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, nil
	}
	if err != nil {
		return wasmrec.Result{}, fmt.Errorf("get: %w", err)
	}
	seen[req.Name]++
	start := time.Now()
	var order []string
	for k := range map[string]bool{"a": true, "b": true, "c": true, "d": true, "e": true} {
		order = append(order, k)
	}
	data := map[string]any{
		"count":   fmt.Sprint(seen[req.Name]),
		"objects": fmt.Sprint(len(seen)),
		"random":  fmt.Sprint(rand.IntN(1 << 30)),
		"order":   strings.Join(order, ""),
		"wall":    start.UTC().Format(time.RFC3339Nano),
		"took":    time.Since(start).String(),
	}
	if version != "1" {
		data["version"] = version
	}
	out := wasmrec.NewObject("v1", "ConfigMap", req.Namespace, req.Name+"-out")
	out.SetNested(data, "data")
	if _, err := c.Apply(ctx, out, true); err != nil {
		return wasmrec.Result{}, fmt.Errorf("apply: %w", err)
	}
	wasmrec.Log.Info("recorded", "count", seen[req.Name], "order", data["order"])
	fmt.Println("record: reconciled", req.Name)
	_ = c.EventFor(ctx, cm.Ref(), "Normal", "Recorded", "count "+data["count"].(string))
	if seen[req.Name]%5 == 0 {
		return wasmrec.Result{}, fmt.Errorf("every fifth reconcile of %s fails (this was number %d)", req.Name, seen[req.Name])
	}
	return wasmrec.Result{}, nil
}
