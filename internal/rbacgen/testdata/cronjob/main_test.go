package main

import (
	"reflect"
	"testing"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// The markers' permissions are added, those of tests and of files a wasm build leaves out are
// not.
func TestMarkersAddPermissions(t *testing.T) {
	want := []wasmrec.Permission{
		{Group: "", Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{Group: "batch", Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{Group: "batch", Resources: []string{"jobs/status"}, Verbs: []string{"get"}},
		{Group: "batch.tutorial.kubebuilder.io", Resources: []string{"cronjobs"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{Group: "batch.tutorial.kubebuilder.io", Resources: []string{"cronjobs/finalizers"}, Verbs: []string{"update"}},
		{Group: "batch.tutorial.kubebuilder.io", Resources: []string{"cronjobs/status"}, Verbs: []string{"get", "update", "patch"}},
	}
	if got := wasmrec.AddedPermissions(); !reflect.DeepEqual(got, want) {
		t.Errorf("added %+v\nwant %+v", got, want)
	}
}
