package errors_test

import (
	"context"
	"testing"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/client"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	apierrors "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/errors"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
)

// The fake cluster answers as the host does; its refusals are told apart as apierrors tells
// the API server's.
func TestRefusalsOfTheClient(t *testing.T) {
	m := wasmrec.Manifest{Name: "t", For: wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Permissions: []wasmrec.Permission{{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create"}}}}
	c := client.From(fake.NewCluster(m).Client())
	ctx := context.Background()
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "gone"}, &cm); !apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		t.Errorf("a missing object: %v", err)
	}
	cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	if err := c.Create(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	if err := c.Create(ctx, &cm); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second create: %v", err)
	}
	if err := c.Delete(ctx, &cm); !apierrors.IsForbidden(err) {
		t.Errorf("a delete the manifest does not permit: %v", err)
	}
}
