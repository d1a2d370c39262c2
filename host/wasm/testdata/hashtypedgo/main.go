// Command hashtypedgo is the typed Go guest of the side-by-side benchmark (e2e
// BenchmarkConfigMapHash): e2e/testdata/crhash's reconcile, ported to wasmrec by changing its
// imports (k8s.io/api to sdk/go/k8s, controller-runtime's client to sdk/go/client) and its
// wiring (Register instead of a manager). It reads a corev1.ConfigMap with the generated decoder
// and merge-patches the annotation bench/hash to the FNV-64a of its sorted data, unless it
// already holds it.
package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
)

// variant makes modules of distinct bytes from this source (go build -ldflags "-X
// main.variant=N"), for e2e BenchmarkDistinctPlugins: each is compiled and kept on its own, as
// distinct plugins are.
var variant string

func init() {
	c := client.New()
	wasmrec.Register(wasmrec.Manifest{
		Name: "hash-typed-go" + variant,
		For:  wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Permissions: []wasmrec.Permission{
			{Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "patch"}},
		},
	}, wasmrec.ReconcilerFunc(func(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
			return wasmrec.Result{}, client.IgnoreNotFound(err)
		}
		sum := hash(cm.Data)
		if cm.Annotations["bench/hash"] == sum {
			return wasmrec.Result{}, nil
		}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"bench/hash":%q}}}`, sum)
		err := c.Patch(ctx, &cm, client.RawPatch("application/merge-patch+json", patch))
		return wasmrec.Result{}, client.IgnoreNotFound(err)
	}))
}

// hash is FNV-64a over key=value\n of the data, in key order, in hex.
func hash(data map[string]string) string {
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		h.Write([]byte(k))
		h.Write([]byte{'='})
		h.Write([]byte(data[k]))
		h.Write([]byte{'\n'})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

func main() {}
