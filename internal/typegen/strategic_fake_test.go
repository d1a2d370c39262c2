package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/strategicpatch"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	"github.com/wasmrec/wasmrec/sdk/go/codec"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

// TestTheFakeAppliesStrategicMergeFromAsKubernetes patches random objects of the kinds with pod
// templates and lists merged by key in the SDK's fake cluster, with the patch StrategicMergeFrom
// makes, and compares what the fake stores with what Kubernetes' strategicpatch makes of the
// same patch: the fake has no patch metadata, and merges by the keys the patch's directives
// name. The metadata the fake writes itself, and status (which a patch of the object leaves
// to the status subresource), are left out of both.
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
		t.Run(k.name, func(t *testing.T) {
			applied := 0
			for i := range rounds {
				orig := k.k8s()
				filler(uint64(i)).Fill(orig)
				origJSON := sanitize(t, orig, apiVersion, kind)
				mod := k.k8s()
				_ = json.Unmarshal(origJSON, mod)
				mutate(reflect.ValueOf(mod).Elem(), rand.New(rand.NewPCG(uint64(i), 11)), filler(uint64(i)+1000), 0)
				modJSON := sanitize(t, mod, apiVersion, kind)

				a, b := k.ours(), k.ours()
				must(t, codec.Unmarshal(origJSON, a))
				must(t, codec.Unmarshal(modJSON, b))
				patch, err := client.StrategicMergeFrom(a.(client.Object)).Data(b.(client.Object))
				if err != nil {
					continue // refused alike by Kubernetes: TestStrategicMergeFromIsKubernetesPatch
				}
				if repeatsAKey(patch) {
					continue // items of one key twice: an object the API server refuses
				}
				want, err := strategicpatch.StrategicMergePatch(origJSON, patch, k.k8s())
				if err != nil {
					continue
				}

				var o wasmrec.Object
				must(t, json.Unmarshal(origJSON, &o.Object))
				m := wasmrec.Manifest{Name: "smp", For: wasmrec.Watch{APIVersion: apiVersion, Kind: kind}, Permissions: []wasmrec.Permission{
					{Group: group, Resources: []string{resource}, Verbs: []string{"get", "list", "watch", "patch"}}}}
				cluster := fake.NewCluster(m, &o)
				ref := wasmrec.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: "ns", Name: "obj"}
				if _, err := cluster.Client().Patch(context.Background(), ref, wasmrec.PatchStrategic, patch); err != nil {
					t.Fatalf("round %d: the fake refuses the patch %s: %v", i, patch, err)
				}
				stored, _ := cluster.Get(apiVersion, kind, "ns", "obj")
				got, _ := json.Marshal(stored.Object)
				x, y := comparable(t, got), comparable(t, want)
				if !reflect.DeepEqual(x, y) {
					t.Fatalf("round %d: the fake makes of the patch\n %s\nsomething else at %s than Kubernetes:\n %s\nnot\n %s", i, patch, firstDiff(x, y, ""), got, want)
				}
				applied++
			}
			if applied < rounds/2 {
				t.Errorf("only %d of %d rounds applied a patch: the test does not test", applied, rounds)
			}
		})
	}
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
