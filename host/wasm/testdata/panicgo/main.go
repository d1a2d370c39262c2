// Command panicgo is a Go guest that fails as authors' Go plugins do, by the name of the object
// it reconciles: "panic" panics with a message, "index" indexes past a slice's end, "loop"
// loops for ever, "says-panic" writes a line that starts with "panic: " to stderr and succeeds,
// "sleep" sleeps 2 s with time.Sleep, "oom" allocates until its runtime runs out of memory.
// Any other name reconciles cleanly.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

func init() {
	wasmrec.Register(wasmrec.Manifest{
		Name: "panic-go",
		For:  wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Permissions: []wasmrec.Permission{
			{Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		},
	}, wasmrec.ReconcilerFunc(reconcile))
}

func reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	switch req.Name {
	case "panic":
		explode(req.Name)
	case "index":
		s := []string{req.Namespace}
		_ = s[len(req.Name)]
	case "loop":
		n := 0
		for {
			n++
		}
	case "oom":
		var held [][]byte
		for {
			held = append(held, make([]byte, 8<<20))
			held[len(held)-1][0] = 1
		}
	case "sleep":
		time.Sleep(2 * time.Second)
	case "says-panic":
		fmt.Fprintln(os.Stderr, "panic: only a line that looks like one")
		fmt.Fprintln(os.Stderr, "and another")
	}
	return wasmrec.Result{}, nil
}

func explode(name string) { panic("the plugin cannot reconcile " + name) }

func main() {}
