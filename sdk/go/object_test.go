package wasmrec

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDeepCopySharesNothing(t *testing.T) {
	o := NewObject("v1", "ConfigMap", "demo", "web")
	o.SetNested(map[string]any{"a": "1", "nested": map[string]any{"b": []any{"x", map[string]any{"c": 1.0}}}}, "data")
	o.SetNested([]string{"one", "two"}, "metadata", "finalizers")
	o.SetNested(map[string]string{"k": "v"}, "metadata", "labels")
	o.SetNested(json.Number("12345678901234567890"), "spec", "big")

	c := o.DeepCopy()
	want := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "web", "namespace": "demo", "finalizers": []any{"one", "two"}, "labels": map[string]any{"k": "v"}},
		"data":     map[string]any{"a": "1", "nested": map[string]any{"b": []any{"x", map[string]any{"c": 1.0}}}},
		"spec":     map[string]any{"big": json.Number("12345678901234567890")},
	}
	if !reflect.DeepEqual(c.Object, want) {
		t.Fatalf("copy:\n got %#v\nwant %#v", c.Object, want)
	}

	// Changing the copy anywhere leaves the original as it was.
	inner, _ := c.NestedSlice("data", "nested", "b")
	inner[1].(map[string]any)["c"] = 2.0
	inner[0] = "y"
	c.SetNested("changed", "data", "a")
	c.Object["metadata"].(map[string]any)["labels"].(map[string]any)["k"] = "w"
	if v, _ := o.NestedString("data", "a"); v != "1" {
		t.Errorf("original data.a = %q", v)
	}
	b, _ := o.NestedSlice("data", "nested", "b")
	if b[0] != "x" || b[1].(map[string]any)["c"] != 1.0 {
		t.Errorf("original data.nested.b = %v", b)
	}
	if l, _ := o.Nested("metadata", "labels"); l.(map[string]string)["k"] != "v" {
		t.Errorf("original labels = %v", l)
	}

	if (*Object)(nil).DeepCopy() != nil {
		t.Error("nil.DeepCopy() is not nil")
	}
	if e := (&Object{}).DeepCopy(); e == nil || e.Object != nil {
		t.Errorf("empty.DeepCopy() = %#v", e)
	}
}

// json.Unmarshal reads into an Object what json.Marshal wrote of it.
func TestAnObjectReadsBackWhatItWrote(t *testing.T) {
	o := NewObject("v1", "ConfigMap", "demo", "web")
	o.Object["data"] = map[string]any{"a": "1"}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back Object
	if err := json.Unmarshal(b, &back); err != nil || back.Name() != "web" || !reflect.DeepEqual(back.Object, o.Object) {
		t.Errorf("read back %v (%v), want %v", back.Object, err, o.Object)
	}
	if err := json.Unmarshal([]byte(`[1]`), &back); err == nil {
		t.Error("an array read as an object")
	}
}

// SetLabels and SetAnnotations write what Labels and Annotations read; nil removes them, and
// an object whose metadata is not an object is left as it is.
func TestSetLabelsAndAnnotations(t *testing.T) {
	var o Object
	o.SetLabels(map[string]string{"app": "web"})
	o.SetAnnotations(map[string]string{"note": "x"})
	if got := o.Labels(); len(got) != 1 || got["app"] != "web" {
		t.Errorf("Labels() = %v after SetLabels", got)
	}
	if got := o.Annotations(); len(got) != 1 || got["note"] != "x" {
		t.Errorf("Annotations() = %v after SetAnnotations", got)
	}
	b, err := o.MarshalJSON()
	if err != nil || string(b) != `{"metadata":{"annotations":{"note":"x"},"labels":{"app":"web"}}}` {
		t.Errorf("MarshalJSON() = %s, %v", b, err)
	}
	o.SetLabels(nil)
	if _, ok := o.Nested("metadata", "labels"); ok {
		t.Error("SetLabels(nil) left metadata.labels")
	}
	if got := o.Annotations(); got["note"] != "x" {
		t.Errorf("SetLabels(nil) touched the annotations: %v", got)
	}
	odd := Object{Object: map[string]any{"metadata": "not an object"}}
	odd.SetLabels(map[string]string{"a": "b"})
	odd.SetLabels(nil)
	if odd.Object["metadata"] != "not an object" {
		t.Errorf("an object whose metadata is a string became %v", odd.Object)
	}
}
