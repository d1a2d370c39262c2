package explore

import (
	"strings"
	"testing"
)

// Objects of one generated prefix are told apart by their contents, not their (random) names:
// the same objects in another order are the same state, and of two that differ, the one left
// unmatched is shown.
func TestGeneratedNamesPairByContent(t *testing.T) {
	obj := func(a string) any { return map[string]any{"data": map[string]any{"a": a}} }
	want := phase{objects: map[string][]any{"ConfigMap default/w-*": {obj("1"), obj("2")}}}
	if d := compareEnd(want, phase{objects: map[string][]any{"ConfigMap default/w-*": {obj("2"), obj("1")}}}); len(d) > 0 {
		t.Errorf("the same objects in another order differ: %v", d)
	}
	d := compareEnd(want, phase{objects: map[string][]any{"ConfigMap default/w-*": {obj("2"), obj("3")}}})
	if len(d) != 1 || !strings.Contains(d[0], `data.a: "1" -> "3"`) {
		t.Errorf("differences %v, want the one of data.a 1 -> 3", d)
	}
}

// A write with options names its object as one without, and a dry run is told apart: it
// stores nothing, so it is neither a write a fault lands on nor a change to deliver.
func TestWritesWithOptionsAreFollowed(t *testing.T) {
	want := keyOf("v1", "ConfigMap", "demo", "x")
	for _, tc := range []struct {
		fn, req string
		dry     bool
	}{
		{"create", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"}}`, false},
		{"update", `{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"}},"fieldOwner":"o"}`, false},
		{"update_status", `{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"}},"dryRun":true}`, true},
		{"patch", `{"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"x","type":"merge","patch":{},"dryRun":true}`, true},
		{"delete", `{"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"x"}`, false},
	} {
		got, ok := writeTarget(tc.fn, []byte(tc.req))
		if !ok || got != want || dryRun(tc.fn, []byte(tc.req)) != tc.dry {
			t.Errorf("%s %s: target %v (%v), dry run %v; want %v, dry run %v", tc.fn, tc.req, got, ok, dryRun(tc.fn, []byte(tc.req)), want, tc.dry)
		}
	}
}
