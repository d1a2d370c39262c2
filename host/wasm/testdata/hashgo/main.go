// Command hashgo is the Go guest of the side-by-side benchmark (e2e BenchmarkConfigMapHash):
// for each ConfigMap, it merge-patches the annotation bench/hash to the FNV-64a of its sorted
// data, unless it already holds it. e2e/testdata/crhash is the same reconcile for
// controller-runtime, and hashc.c for C.
package main

import (
	"context"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

type configMap struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

func init() {
	client := wasmrec.NewClient()
	wasmrec.Register(wasmrec.Manifest{
		Name: "hash-go",
		For:  wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Permissions: []wasmrec.Permission{
			{Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "patch"}},
		},
	}, wasmrec.ReconcilerFunc(func(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		var cm configMap
		if err := client.GetInto(ctx, "v1", "ConfigMap", req.Namespace, req.Name, &cm); err != nil {
			if wasmrec.IsNotFound(err) {
				return wasmrec.Result{}, nil
			}
			return wasmrec.Result{}, err
		}
		sum := hash(cm.Data)
		if cm.Metadata.Annotations["bench/hash"] == sum {
			return wasmrec.Result{}, nil
		}
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{"bench/hash": sum}}}
		ref := wasmrec.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: req.Namespace, Name: req.Name}
		_, err := client.Patch(ctx, ref, "merge", patch)
		return wasmrec.Result{}, err
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
