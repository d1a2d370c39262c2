package crdwatch

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A kind not served says what would serve it, or what was most likely meant among the kinds
// its group's CRDs serve.
func TestNotServedSaysWhatWasMeant(t *testing.T) {
	w := offlineWatcher(t)
	w.update("widgets.example.com", []schema.GroupVersionKind{{Group: "example.com", Version: "v1", Kind: "Widget"}})
	w.update("gizmoes.example.com", []schema.GroupVersionKind{{Group: "example.com", Version: "v1", Kind: "Gizmo"}, {Group: "example.com", Version: "v1beta1", Kind: "Gizmo"}})
	got := w.NotServed([]schema.GroupVersionKind{
		{Group: "example.com", Version: "v1", Kind: "Widget"},  // served
		{Group: "example.com", Version: "v1", Kind: "Widgt"},   // a typo
		{Group: "example.com", Version: "v1", Kind: "widgets"}, // the plural, lower case
		{Group: "example.com", Version: "v2", Kind: "Gizmo"},   // another version
		{Group: "example.com", Version: "v1", Kind: "Sprocket"},
		{Group: "other.example.com", Version: "v1", Kind: "Widgt"}, // the typo's group serves nothing
		{Version: "v1", Kind: "ConfigMaps"},
		configMapGVK, // served
	})
	want := []string{
		"Widgt.v1.example.com (no CRD serves it: did you mean Widget, which example.com serves?)",
		"widgets.v1.example.com (no CRD serves it: did you mean Widget, which example.com serves?)",
		"Gizmo.v2.example.com (example.com serves Gizmo at v1, v1beta1 only)",
		"Sprocket.v1.example.com (install the CRD that serves it, sprockets.example.com)",
		"Widgt.v1.other.example.com (install the CRD that serves it, widgts.other.example.com)",
		"ConfigMaps.v1 (v1 has no kind ConfigMaps: did you mean ConfigMap?)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("NotServed =\n%q\nwant\n%q", got, want)
	}
}
