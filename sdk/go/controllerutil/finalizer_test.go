package controllerutil_test

import (
	"testing"

	"github.com/wasmrec/wasmrec/sdk/go/controllerutil"
)

func TestFinalizers(t *testing.T) {
	withFinalizers := func(list string) string {
		if list == "" {
			return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`
		}
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","finalizers":` + list + `}}`
	}
	for _, tc := range []struct {
		name, before string
		changed      bool
		after        string
	}{
		{"add to none", "", true, `["wasmrec.dev/cleanup"]`},
		{"add beside others, at the end", `["a"]`, true, `["a","wasmrec.dev/cleanup"]`},
		{"add one already there", `["wasmrec.dev/cleanup","a"]`, false, `["wasmrec.dev/cleanup","a"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := obj(t, withFinalizers(tc.before))
			if got := controllerutil.AddFinalizer(o, "wasmrec.dev/cleanup"); got != tc.changed {
				t.Errorf("AddFinalizer = %v, want %v", got, tc.changed)
			}
			sameJSON(t, "finalizers", jsonOf(t, o, "metadata", "finalizers"), tc.after)
			if !controllerutil.ContainsFinalizer(o, "wasmrec.dev/cleanup") {
				t.Error("ContainsFinalizer after AddFinalizer = false")
			}
		})
	}
	for _, tc := range []struct {
		name, before string
		changed      bool
		after        string
	}{
		{"remove from none", "", false, "absent"},
		{"remove one not there", `["a"]`, false, `["a"]`},
		{"remove one, keeping the others in order", `["a","wasmrec.dev/cleanup","b"]`, true, `["a","b"]`},
		{"remove every occurrence", `["wasmrec.dev/cleanup","a","wasmrec.dev/cleanup"]`, true, `["a"]`},
		{"remove the last: the list goes", `["wasmrec.dev/cleanup"]`, true, "absent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := obj(t, withFinalizers(tc.before))
			if got := controllerutil.RemoveFinalizer(o, "wasmrec.dev/cleanup"); got != tc.changed {
				t.Errorf("RemoveFinalizer = %v, want %v", got, tc.changed)
			}
			sameJSON(t, "finalizers", jsonOf(t, o, "metadata", "finalizers"), tc.after)
			if controllerutil.ContainsFinalizer(o, "wasmrec.dev/cleanup") {
				t.Error("ContainsFinalizer after RemoveFinalizer = true")
			}
		})
	}

	// A list the plugin set as a []string is read as one.
	o := obj(t, withFinalizers(""))
	o.SetNested([]string{"a", "b"}, "metadata", "finalizers")
	if !controllerutil.ContainsFinalizer(o, "b") || !controllerutil.RemoveFinalizer(o, "a") {
		t.Error("a []string list is not read")
	}
	sameJSON(t, "finalizers", jsonOf(t, o, "metadata", "finalizers"), `["b"]`)

	// metadata that is not an object is left alone, and nothing is reported changed.
	bad := obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":"x"}`)
	if controllerutil.AddFinalizer(bad, "a") {
		t.Error("AddFinalizer on metadata that is a string = true")
	}
}
