package object

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestProtobufIsMadeOnceAndSharedByCopies(t *testing.T) {
	o, err := Decode([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"demo"},"data":{"k":"v"}}`))
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	b, ok := o.Protobuf(gvk)
	if !ok || !strings.HasPrefix(string(b), "k8s\x00") || !strings.Contains(string(b), "ConfigMap") {
		t.Fatalf("%q, %v; want the protobuf envelope", b, ok)
	}
	again, _ := o.Protobuf(gvk)
	cp, _ := o.DeepCopyObject().(*Object).Protobuf(gvk)
	if &again[0] != &b[0] || &cp[0] != &b[0] {
		t.Errorf("a second call, or a copy's, made the encoding again")
	}

	app, err := Decode([]byte(`{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","metadata":{"name":"web","namespace":"demo"}}`))
	if err != nil {
		t.Fatal(err)
	}
	appGVK := schema.GroupVersionKind{Group: "demo.wasmrec.dev", Version: "v1", Kind: "App"}
	for range 2 {
		if b, ok := app.Protobuf(appGVK); ok || len(b) != 0 {
			t.Errorf("a custom resource: %q, %v; want none", b, ok)
		}
	}
	// Not the kind's JSON: a string where the ConfigMap has a map.
	bad, _ := Decode([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":"x"}`))
	if b, ok := bad.Protobuf(gvk); ok {
		t.Errorf("JSON that is not a ConfigMap's: %q; want none", b)
	}
}
