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
