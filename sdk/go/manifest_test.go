package wasmrec

import (
	"encoding/json"
	"testing"
)

// The constants are the manifest's wire format: a manifest written with them encodes to the
// strings ABI.md names, and abi's validation accepts each.
func TestPredicateAndMapConstantsAreTheWireFormat(t *testing.T) {
	sel := &LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	m := Manifest{
		For: Watch{APIVersion: "v1", Kind: "ConfigMap", Predicates: []Predicate{
			{Type: PredicateGenerationChanged},
			{Type: PredicateOr, Predicates: []Predicate{
				{Type: PredicateAnnotationChanged},
				{Type: PredicateLabelChanged},
				{Type: PredicateLabelSelector, Selector: sel},
				{Type: PredicateNamespace, Namespaces: []string{"x"}},
				{Type: PredicateAnd},
				{Type: PredicateNot, Predicates: []Predicate{{Type: PredicateLabelChanged}}},
			}},
		}},
		Watches: []Watch{
			{APIVersion: "v1", Kind: "Secret", Map: MapSameName},
			{APIVersion: "v1", Kind: "Service", Map: MapNamespace},
		},
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"for":{"apiVersion":"v1","kind":"ConfigMap","predicates":[{"type":"GenerationChanged"},` +
		`{"type":"Or","predicates":[{"type":"AnnotationChanged"},{"type":"LabelChanged"},` +
		`{"type":"LabelSelector","selector":{"matchLabels":{"a":"b"}}},{"type":"Namespace","namespaces":["x"]},` +
		`{"type":"And"},{"type":"Not","predicates":[{"type":"LabelChanged"}]}]}]},` +
		`"watches":[{"apiVersion":"v1","kind":"Secret","map":"sameName"},{"apiVersion":"v1","kind":"Service","map":"namespace"}]}`
	if string(got) != want {
		t.Errorf("manifest:\n got %s\nwant %s", got, want)
	}
}
