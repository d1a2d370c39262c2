package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	k8sappsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	"github.com/wasmrec/wasmrec/sdk/go/codec"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

// TestTheFakeAppliesStrategicMergeFromAsKubernetes patches random objects of the kinds with pod
// templates and lists merged by key in the SDK's fake cluster, and compares what the fake
// stores with what Kubernetes' strategicpatch makes of the same patch on the same object, with
// k8s.io/api's patch metadata:
//   - as read: the patch StrategicMergeFrom makes, on the object it was made from;
//   - another writer: the same patch on the object as another writer changed it since (items
//     added to a list the plugin read empty stay, as the API server keeps them); lists are
//     compared as sets here, as the fake leaves the other writer's items in their order where
//     the API server's place for them follows from how its slices share memory;
//   - by hand: that patch without its $setElementOrder directives, as a patch written by hand
//     has none (a list of containers is merged by name, not replaced).
//
// Both results are compared as the API server stores them, through the kind's Go type. The
// metadata the fake writes itself, and status (which a patch of the object leaves to the
// status subresource), are left out of both.
func TestTheFakeAppliesStrategicMergeFromAsKubernetes(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	resources := map[string]string{"apps/v1/Deployment": "deployments", "apps/v1/StatefulSet": "statefulsets", "apps/v1/DaemonSet": "daemonsets",
		"batch/v1/CronJob": "cronjobs", "batch/v1/Job": "jobs", "v1/Pod": "pods", "v1/Service": "services", "v1/ConfigMap": "configmaps"}
	for _, k := range generatedKinds {
		resource, ok := resources[k.name]
		if !ok {
			continue
		}
		apiVersion := k.name[:strings.LastIndex(k.name, "/")]
		kind := k.name[strings.LastIndex(k.name, "/")+1:]
		group, _, _ := strings.Cut(apiVersion, "/")
		if !strings.Contains(apiVersion, "/") {
			group = ""
		}
		m := wasmrec.Manifest{Name: "smp", For: wasmrec.Watch{APIVersion: apiVersion, Kind: kind}, Permissions: []wasmrec.Permission{
			{Group: group, Resources: []string{resource}, Verbs: []string{"get", "list", "watch", "patch"}}}}
		// both applies patch to base in the fake and with Kubernetes' strategicpatch: ok is
		// false where Kubernetes refuses it.
		both := func(t *testing.T, round int, variant string, base, patch []byte) bool {
			want, err := strategicpatch.StrategicMergePatch(base, patch, k.k8s())
			if err != nil {
				return false
			}
			var o wasmrec.Object
			must(t, json.Unmarshal(base, &o.Object))
			cluster := fake.NewCluster(m, &o)
			ref := wasmrec.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: "ns", Name: "obj"}
			if _, err := cluster.Client().Patch(context.Background(), ref, wasmrec.PatchStrategic, patch); err != nil {
				t.Fatalf("round %d, %s: the fake refuses the patch %s: %v", round, variant, patch, err)
			}
			stored, _ := cluster.Get(apiVersion, kind, "ns", "obj")
			got, _ := json.Marshal(stored.Object)
			// Both as the API server stores them: through the kind's Go type, where a null
			// and a missing member are one.
			x, y := comparable(t, typed(t, got, k.k8s())), comparable(t, typed(t, want, k.k8s()))
			if variant == "another writer" {
				x, y = unordered(x), unordered(y)
			}
			if !reflect.DeepEqual(x, y) {
				t.Fatalf("round %d, %s: the fake makes of the patch\n %s\non\n %s\nsomething else at %s than Kubernetes:\n %s\nnot\n %s", round, variant, patch, base, firstDiff(x, y, ""), got, want)
			}
			return true
		}
		t.Run(k.name, func(t *testing.T) {
			applied := map[string]int{}
			for i := range rounds {
				orig := k.k8s()
				filler(uint64(i)).Fill(orig)
				origJSON := sanitize(t, orig, apiVersion, kind)
				mod := k.k8s()
				_ = json.Unmarshal(origJSON, mod)
				mutate(reflect.ValueOf(mod).Elem(), rand.New(rand.NewPCG(uint64(i), 11)), filler(uint64(i)+1000), 0)
				modJSON := sanitize(t, mod, apiVersion, kind)
				other := k.k8s()
				_ = json.Unmarshal(origJSON, other)
				mutate(reflect.ValueOf(other).Elem(), rand.New(rand.NewPCG(uint64(i), 12)), filler(uint64(i)+2000), 0)
				otherJSON := sanitize(t, other, apiVersion, kind)

				a, b := k.ours(), k.ours()
				must(t, codec.Unmarshal(origJSON, a))
				must(t, codec.Unmarshal(modJSON, b))
				patch, err := client.StrategicMergeFrom(a.(client.Object)).Data(b.(client.Object))
				if err != nil {
					continue // refused alike by Kubernetes: TestStrategicMergeFromIsKubernetesPatch
				}
				if repeatsAKey(patch) || repeatsAKey(otherJSON) {
					continue // items of one key twice: an object the API server refuses
				}
				for variant, c := range map[string]struct{ base, patch []byte }{
					"as read":        {origJSON, patch},
					"another writer": {otherJSON, patch},
					"by hand":        {origJSON, withoutOrders(t, patch)},
				} {
					if both(t, i, variant, c.base, c.patch) {
						applied[variant]++
					}
				}
			}
			for _, variant := range []string{"as read", "another writer", "by hand"} {
				if applied[variant] < rounds/2 {
					t.Errorf("%s: only %d of %d rounds applied a patch: the test does not test", variant, applied[variant], rounds)
				}
			}
		})
	}
}

// typed is data decoded into obj and encoded again.
func typed(t *testing.T, data []byte, obj any) []byte {
	must(t, json.Unmarshal(data, obj))
	out, err := json.Marshal(obj)
	must(t, err)
	return out
}

// unordered is v with every list sorted by its items' JSON.
func unordered(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = unordered(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = unordered(e)
		}
		slices.SortFunc(out, func(a, b any) int {
			x, _ := json.Marshal(a)
			y, _ := json.Marshal(b)
			return strings.Compare(string(x), string(y))
		})
		return out
	}
	return v
}

// withoutOrders is patch without its $setElementOrder directives.
func withoutOrders(t *testing.T, patch []byte) []byte {
	var p any
	must(t, json.Unmarshal(patch, &p))
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if strings.HasPrefix(k, "$setElementOrder/") {
					delete(v, k)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(p)
	out, err := json.Marshal(p)
	must(t, err)
	return out
}

// repeatsAKey reports a patch whose $setElementOrder lists an item twice.
func repeatsAKey(patch []byte) bool {
	var p any
	_ = json.Unmarshal(patch, &p)
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if l, ok := e.([]any); ok && strings.HasPrefix(k, "$setElementOrder/") {
					seen := map[string]bool{}
					for _, x := range l {
						b, _ := json.Marshal(x)
						if seen[string(b)] {
							return true
						}
						seen[string(b)] = true
					}
				}
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(p)
}

// sanitize is obj's JSON as the fake takes it: its name, namespace, finalizers and owner
// references kept of its metadata, and no status.
func sanitize(t *testing.T, obj any, apiVersion, kind string) []byte {
	data, err := json.Marshal(obj)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(data, &m))
	md, _ := m["metadata"].(map[string]any)
	keep := map[string]any{"name": "obj", "namespace": "ns"}
	for _, f := range []string{"finalizers", "ownerReferences"} {
		if v, ok := md[f]; ok {
			keep[f] = v
		}
	}
	m["metadata"], m["apiVersion"], m["kind"] = keep, apiVersion, kind
	delete(m, "status")
	out, err := json.Marshal(m)
	must(t, err)
	return out
}

// comparable is an object's JSON without what the fake writes into metadata, and without
// status.
func comparable(t *testing.T, data []byte) any {
	var m map[string]any
	must(t, json.Unmarshal(data, &m))
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
			delete(md, f)
		}
	}
	delete(m, "status")
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTheFakeAppliesHandWrittenStrategicPatchesAsKubernetes applies strategic merge patches
// written by hand (testdata/handwritten-smp.json: directives in lists and maps, items without
// their key, values of the wrong type, nulls) to a Deployment in the fake cluster and with
// Kubernetes' strategicpatch: where Kubernetes refuses a patch (or the kind's Go type refuses
// its result), the fake refuses it too; else both results, read through the kind's Go type,
// are the same.
func TestTheFakeAppliesHandWrittenStrategicPatchesAsKubernetes(t *testing.T) {
	data, err := os.ReadFile("testdata/handwritten-smp.json")
	must(t, err)
	var file struct {
		Base  json.RawMessage
		Cases map[string]json.RawMessage
	}
	must(t, json.Unmarshal(data, &file))
	m := wasmrec.Manifest{Name: "smp", For: wasmrec.Watch{APIVersion: "apps/v1", Kind: "Deployment"}, Permissions: []wasmrec.Permission{
		{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}}}}
	for name, patch := range file.Cases {
		t.Run(name, func(t *testing.T) {
			var want []byte
			merged, err := strategicpatch.StrategicMergePatch(file.Base, patch, &k8sappsv1.Deployment{})
			if err == nil {
				var d k8sappsv1.Deployment
				if err = json.Unmarshal(merged, &d); err == nil {
					want, _ = json.Marshal(&d)
				}
			}
			var o wasmrec.Object
			must(t, json.Unmarshal(file.Base, &o.Object))
			cluster := fake.NewCluster(m, &o)
			ref := wasmrec.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "obj"}
			_, ferr := cluster.Client().Patch(context.Background(), ref, wasmrec.PatchStrategic, patch)
			switch {
			case err != nil && ferr == nil:
				t.Fatalf("Kubernetes refuses the patch %s (%v); the fake takes it", patch, err)
			case err == nil && ferr != nil:
				t.Fatalf("the fake refuses the patch %s: %v", patch, ferr)
			case err != nil:
				return
			}
			stored, _ := cluster.Get("apps/v1", "Deployment", "ns", "obj")
			got, _ := json.Marshal(stored.Object)
			x, y := comparable(t, typed(t, got, &k8sappsv1.Deployment{})), comparable(t, want)
			if !reflect.DeepEqual(x, y) {
				t.Fatalf("the fake makes of the patch %s something else at %s than Kubernetes:\n %s\nnot\n %s", patch, firstDiff(x, y, ""), got, want)
			}
		})
	}
}
