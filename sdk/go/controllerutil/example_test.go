package controllerutil_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/controllerutil"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

// A reconciler keeps a copy of a ConfigMap, controlled by it: created the first time, patched
// when the source changes, left alone when it is as it should be.
func ExampleCreateOrPatch() {
	src := wasmrec.NewObject("v1", "ConfigMap", "demo", "settings")
	src.SetNested(map[string]any{"color": "blue"}, "data")
	cluster := fake.NewCluster(wasmrec.Manifest{
		For:         wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Permissions: []wasmrec.Permission{{Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch"}}},
	}, src)
	client := cluster.Client()
	ctx := context.Background()

	mirror := func() {
		src, _ := client.Get(ctx, "v1", "ConfigMap", "demo", "settings")
		cp := wasmrec.NewObject("v1", "ConfigMap", "demo", "settings-copy")
		op, err := controllerutil.CreateOrPatch(ctx, client, cp, func() error {
			cp.Object["data"] = src.Object["data"]
			return controllerutil.SetControllerReference(src, cp)
		})
		color, _ := cp.NestedString("data", "color")
		fmt.Println(op, err, color, controllerutil.IsControlledBy(cp, src))
	}
	mirror()
	mirror()
	src.SetNested("green", "data", "color")
	cluster.Put(src)
	mirror()

	// Output:
	// created <nil> blue true
	// unchanged <nil> blue true
	// updated <nil> green true
}

func ExampleSetControllerReference() {
	owner := wasmrec.NewObject("demo.wasmrec.dev/v1", "App", "demo", "web")
	owner.SetNested("7d8f-uid", "metadata", "uid") // as read from the cluster
	cm := wasmrec.NewObject("v1", "ConfigMap", "demo", "web")

	fmt.Println(controllerutil.SetControllerReference(owner, cm))
	fmt.Printf("%+v\n", *controllerutil.GetControllerOf(cm))

	other := wasmrec.NewObject("demo.wasmrec.dev/v1", "App", "demo", "api")
	other.SetNested("0a1b-uid", "metadata", "uid")
	err := controllerutil.SetControllerReference(other, cm) // names the controller it has
	var owned *controllerutil.AlreadyOwnedError
	fmt.Println(err, errors.As(err, &owned))

	// Output:
	// <nil>
	// {APIVersion:demo.wasmrec.dev/v1 Kind:App Name:web UID:7d8f-uid Controller:true BlockOwnerDeletion:true}
	// ConfigMap demo/web is already owned by another App controller web true
}

func ExampleSetStatusCondition() {
	app := wasmrec.NewObject("demo.wasmrec.dev/v1", "App", "demo", "web")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) // leave it zero for now

	changed := controllerutil.SetStatusCondition(app, controllerutil.Condition{
		Type: "Ready", Status: controllerutil.ConditionFalse, Reason: "Waiting", Message: "for the Service",
		ObservedGeneration: 1, LastTransitionTime: at,
	})
	fmt.Println(changed, controllerutil.IsStatusConditionFalse(app, "Ready"))

	// The same status with another reason: changed, but lastTransitionTime stays.
	changed = controllerutil.SetStatusCondition(app, controllerutil.Condition{
		Type: "Ready", Status: controllerutil.ConditionFalse, Reason: "StillWaiting", ObservedGeneration: 1,
		LastTransitionTime: at.Add(time.Minute),
	})
	c := controllerutil.FindStatusCondition(app, "Ready")
	fmt.Println(changed, c.Reason, c.LastTransitionTime.Format(time.RFC3339))

	// Output:
	// true true
	// true StillWaiting 2026-01-02T03:04:05Z
}

func ExampleAddFinalizer() {
	o := wasmrec.NewObject("demo.wasmrec.dev/v1", "App", "demo", "web")
	fmt.Println(controllerutil.AddFinalizer(o, "demo.wasmrec.dev/cleanup"))
	fmt.Println(controllerutil.AddFinalizer(o, "demo.wasmrec.dev/cleanup"))
	fmt.Println(controllerutil.ContainsFinalizer(o, "demo.wasmrec.dev/cleanup"))
	fmt.Println(controllerutil.RemoveFinalizer(o, "demo.wasmrec.dev/cleanup"))

	// Output:
	// true
	// false
	// true
	// true
}
