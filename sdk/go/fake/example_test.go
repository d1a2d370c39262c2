package fake_test

import (
	"context"
	"fmt"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

// greeter is a plugin's reconciler: for each Greeting it applies a ConfigMap holding
// spec.message, owned by the Greeting, and says so in an Event. The plugin registers it with
// wasmrec.NewClient() in init; a test gives it the fake cluster's Client.
type greeter struct{ client *wasmrec.Client }

var greeterManifest = wasmrec.Manifest{
	Name: "greeter",
	For:  wasmrec.Watch{APIVersion: "demo.wasmrec.dev/v1", Kind: "Greeting"},
	Owns: []wasmrec.Watch{{APIVersion: "v1", Kind: "ConfigMap"}},
	Permissions: []wasmrec.Permission{
		{Group: "demo.wasmrec.dev", Resources: []string{"greetings"}, Verbs: []string{"get", "list", "watch"}},
		{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}},
	},
}

func (g *greeter) Reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	greeting, err := g.client.Get(ctx, "demo.wasmrec.dev/v1", "Greeting", req.Namespace, req.Name)
	if wasmrec.IsNotFound(err) {
		return wasmrec.Result{}, nil
	}
	if err != nil {
		return wasmrec.Result{}, err
	}
	message, _ := greeting.NestedString("spec", "message")
	cm := wasmrec.NewObject("v1", "ConfigMap", req.Namespace, req.Name)
	cm.SetNested(map[string]any{"message": message}, "data")
	if err := cm.SetControllerOwner(greeting); err != nil {
		return wasmrec.Result{}, err
	}
	if _, err := g.client.Apply(ctx, cm, true); err != nil {
		return wasmrec.Result{}, err
	}
	if err := g.client.Event(ctx, "Normal", "Applied", "configmap "+req.Name+" holds the message"); err != nil {
		return wasmrec.Result{}, err
	}
	wasmrec.Log.Info("applied", "configmap", req.String(), "bytes", len(message))
	return wasmrec.Result{}, nil
}

func Example() {
	greeting := wasmrec.NewObject("demo.wasmrec.dev/v1", "Greeting", "demo", "hello")
	greeting.SetNested(map[string]any{"message": "hi there"}, "spec")
	c := fake.NewCluster(greeterManifest, greeting)
	r := &greeter{client: c.Client()}

	_, err := c.Reconcile(context.Background(), r, wasmrec.NewRequest("demo", "hello"))
	fmt.Println("reconcile error:", err)

	cm, _ := c.Get("v1", "ConfigMap", "demo", "hello")
	message, _ := cm.NestedString("data", "message")
	owner, _ := cm.NestedSlice("metadata", "ownerReferences")
	fmt.Printf("configmap: message %q, owned by %s\n", message, owner[0].(map[string]any)["name"])
	for _, e := range c.Events() {
		fmt.Printf("event: %s %s about %s %s/%s: %s\n", e.Type, e.Reason, e.Object.Kind, e.Object.Namespace, e.Object.Name, e.Message)
	}
	for _, l := range c.Logs() {
		fmt.Println("log:", l)
	}

	// The plugin may not delete ConfigMaps: the fake says so as the host would.
	err = c.Client().Delete(context.Background(), cm.Ref(), wasmrec.DeleteOptions{})
	fmt.Println("delete forbidden:", wasmrec.IsForbidden(err))

	// Output:
	// reconcile error: <nil>
	// configmap: message "hi there", owned by hello
	// event: Normal Applied about Greeting demo/hello: configmap hello holds the message
	// log: info applied configmap=demo/hello bytes=8
	// delete forbidden: true
}

// A plugin that does not use the Go SDK (a module in C, say) makes its host calls as names and
// JSON requests: Call answers them as the host would, with the ABI's statuses.
func ExampleCluster_Call() {
	c := fake.NewCluster(greeterManifest, wasmrec.NewObject("demo.wasmrec.dev/v1", "Greeting", "demo", "hello"))
	ctx := context.Background()
	_, _ = c.Reconcile(ctx, wasmrec.ReconcilerFunc(func(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		status, resp := c.Call(ctx, abi.ImportGet, []byte(`{"apiVersion":"demo.wasmrec.dev/v1","kind":"Greeting","namespace":"demo","name":"hello"}`))
		fmt.Println("get:", status, len(resp) > 0)
		status, _ = c.Call(ctx, abi.ImportEvent, []byte(`{"type":"Normal","reason":"Seen"}`))
		fmt.Println("event:", status)
		status, resp = c.Call(ctx, abi.ImportDelete, []byte(`{"apiVersion":"demo.wasmrec.dev/v1","kind":"Greeting","namespace":"demo","name":"hello"}`))
		fmt.Printf("delete: %v: %s\n", status, resp)
		return wasmrec.Result{}, nil
	}), wasmrec.NewRequest("demo", "hello"))
	fmt.Println("events:", len(c.Events()), c.Events()[0].Object.Name)

	// Output:
	// get: ok true
	// event: ok
	// delete: forbidden: forbidden: delete Greeting.v1.demo.wasmrec.dev: plugin "greeter" may delete nothing in API group demo.wasmrec.dev (no such rule is both asked for in its manifest and granted)
	// events: 1 hello
}
