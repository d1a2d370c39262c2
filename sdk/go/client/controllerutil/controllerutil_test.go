package controllerutil_test

import (
	"context"
	"errors"
	"testing"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	"github.com/wasmrec/wasmrec/sdk/go/client/controllerutil"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
	appsv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/apps/v1"
	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
)

var manifest = wasmrec.Manifest{
	Name: "typed-util",
	For:  wasmrec.Watch{APIVersion: "apps/v1", Kind: "Deployment"},
	Permissions: []wasmrec.Permission{
		{Group: "apps", Resources: []string{"deployments", "deployments/status"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
	},
}

func owner(t *testing.T, c *client.Client) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}
	if err := c.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCreateOrUpdateAndOwnerReferences(t *testing.T) {
	cluster := fake.NewCluster(manifest)
	c := client.From(cluster.Client())
	ctx := context.Background()
	d := owner(t, c)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-config"}}
	mutate := func(v string) controllerutil.MutateFn {
		return func() error {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["k"] = v
			return controllerutil.SetControllerReference(d, cm)
		}
	}
	for i, step := range []struct {
		value string
		want  controllerutil.OperationResult
	}{{"1", controllerutil.OperationResultCreated}, {"1", controllerutil.OperationResultNone}, {"2", controllerutil.OperationResultUpdated}} {
		got, err := controllerutil.CreateOrUpdate(ctx, c, cm, mutate(step.value))
		if err != nil || got != step.want {
			t.Fatalf("step %d: %s, %v; want %s", i, got, err, step.want)
		}
	}
	stored, _ := cluster.Get("v1", "ConfigMap", "demo", "web-config")
	if v, _ := stored.NestedString("data", "k"); v != "2" {
		t.Fatalf("data.k = %q", v)
	}
	if !metav1.IsControlledBy(cm, d) || !controllerutil.HasControllerReference(cm) {
		t.Fatalf("owner references %+v", cm.OwnerReferences)
	}

	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "other", UID: "u-other"}}
	var owned *controllerutil.AlreadyOwnedError
	if err := controllerutil.SetControllerReference(other, cm); !errors.As(err, &owned) || owned.Owner.Name != "web" {
		t.Fatalf("a second controller: %v", err)
	}
	if err := controllerutil.SetOwnerReference(other, cm); err != nil || len(cm.OwnerReferences) != 2 {
		t.Fatalf("SetOwnerReference: %v, %+v", err, cm.OwnerReferences)
	}
	if err := controllerutil.RemoveOwnerReference(other, cm); err != nil || len(cm.OwnerReferences) != 1 {
		t.Fatalf("RemoveOwnerReference: %v, %+v", err, cm.OwnerReferences)
	}
	elsewhere := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x"}}
	if err := controllerutil.SetControllerReference(d, elsewhere); err == nil {
		t.Fatal("an owner in another namespace was accepted")
	}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, cm, func() error { cm.Name = "renamed"; return nil }); err == nil {
		t.Fatal("a mutate that renames the object was accepted")
	}
}

func TestCreateOrPatchPatchesTheStatusApart(t *testing.T) {
	cluster := fake.NewCluster(manifest)
	c := client.From(cluster.Client())
	ctx := context.Background()
	d := owner(t, c)

	got, err := controllerutil.CreateOrPatch(ctx, c, d, func() error {
		d.Labels = map[string]string{"tier": "front"}
		d.Status.ObservedGeneration = 7
		return nil
	})
	if err != nil || got != controllerutil.OperationResultUpdatedStatus {
		t.Fatalf("%s, %v; want updatedStatus", got, err)
	}
	got, err = controllerutil.CreateOrPatch(ctx, c, d, func() error { d.Status.ReadyReplicas = 1; return nil })
	if err != nil || got != controllerutil.OperationResultUpdatedStatusOnly {
		t.Fatalf("%s, %v; want updatedStatusOnly", got, err)
	}
	stored, _ := cluster.Get("apps/v1", "Deployment", "demo", "web")
	if g, _ := stored.NestedInt64("status", "observedGeneration"); g != 7 || stored.Labels()["tier"] != "front" {
		t.Fatalf("stored %v", stored.Object)
	}
	if got, err := controllerutil.CreateOrPatch(ctx, c, d, func() error { return nil }); err != nil || got != controllerutil.OperationResultNone {
		t.Fatalf("%s, %v; want unchanged", got, err)
	}
	if _, err := controllerutil.CreateOrPatch(ctx, c, d, func() error { d.Name = "renamed"; return nil }); err == nil {
		t.Fatal("a mutate that renames the object was accepted")
	}

	if !controllerutil.AddFinalizer(d, "example.com/f") || controllerutil.AddFinalizer(d, "example.com/f") || !controllerutil.ContainsFinalizer(d, "example.com/f") {
		t.Fatal("AddFinalizer")
	}
	if !controllerutil.RemoveFinalizer(d, "example.com/f") || controllerutil.RemoveFinalizer(d, "example.com/f") {
		t.Fatal("RemoveFinalizer")
	}
}

// A copy made the usual way turns an empty value into a nil one: controller-runtime's
// CreateOrUpdate sees no change there, and neither does this one, where comparing the JSON
// ("" against null) updated the object on every reconcile.
func TestCreateOrUpdateSeesNilAndEmptyAlike(t *testing.T) {
	cluster := fake.NewCluster(manifest)
	c := client.From(cluster.Client())
	ctx := context.Background()
	source := map[string][]byte{"empty": {}, "some": []byte("x")}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "copy"}}
	copyData := func() error {
		cm.BinaryData = map[string][]byte{}
		for k, v := range source {
			cm.BinaryData[k] = append([]byte(nil), v...) // nil for the empty value
		}
		cm.Labels = nil // was empty, or not there
		return nil
	}
	// As the API server stores it: an empty value is "", which reads back as an empty []byte.
	stored := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "copy", Labels: map[string]string{}}, BinaryData: map[string][]byte{"empty": {}, "some": []byte("x")}}
	if err := c.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if got, err := controllerutil.CreateOrUpdate(ctx, c, cm, copyData); err != nil || got != controllerutil.OperationResultNone {
			t.Fatalf("again (%d): %s, %v; want unchanged", i, got, err)
		}
	}
	source["some"] = []byte("y")
	if got, err := controllerutil.CreateOrUpdate(ctx, c, cm, copyData); err != nil || got != controllerutil.OperationResultUpdated {
		t.Fatalf("after a change: %s, %v; want updated", got, err)
	}
}
