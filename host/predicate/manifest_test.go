package predicate

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/event"
)

// The manifest's predicates mean what the host's do, combined as written.
func TestPredicatesAreTheHosts(t *testing.T) {
	preds, err := FromManifest([]abi.Predicate{
		{Type: abi.PredicateLabelSelector, Selector: &abi.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
		{Type: abi.PredicateNot, Predicates: []abi.Predicate{{Type: abi.PredicateNamespace, Namespaces: []string{"kube-system"}}}},
		{Type: abi.PredicateOr, Predicates: []abi.Predicate{{Type: abi.PredicateGenerationChanged}, {Type: abi.PredicateLabelChanged}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	obj := func(ns string, labels map[string]string, generation int64) event.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: labels, Generation: generation}}
	}
	teamA := map[string]string{"team": "a"}
	for _, tc := range []struct {
		what string
		pred int
		obj  event.Object
		want bool
	}{
		{"a label the selector matches", 0, obj("x", teamA, 1), true},
		{"no label", 0, obj("x", nil, 1), false},
		{"not kube-system: another namespace", 1, obj("x", nil, 1), true},
		{"not kube-system: kube-system", 1, obj("kube-system", nil, 1), false},
	} {
		if got := preds[tc.pred].Create(event.CreateEvent{Object: tc.obj}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, got, tc.want)
		}
	}
	or := preds[2]
	if !or.Update(event.UpdateEvent{ObjectOld: obj("x", nil, 1), ObjectNew: obj("x", teamA, 1)}) {
		t.Error("generation or labels changed: a label change does not pass")
	}
	if or.Update(event.UpdateEvent{ObjectOld: obj("x", teamA, 1), ObjectNew: obj("x", teamA, 1)}) {
		t.Error("generation or labels changed: an update that changes neither passes")
	}
}

// ResourceVersionChanged in a manifest drops a resync's update (the same resourceVersion).
func TestResourceVersionChangedFromTheManifest(t *testing.T) {
	preds, err := FromManifest([]abi.Predicate{{Type: abi.PredicateResourceVersionChanged}})
	if err != nil {
		t.Fatal(err)
	}
	at := func(rv string) event.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "x", ResourceVersion: rv}}
	}
	if preds[0].Update(event.UpdateEvent{ObjectOld: at("5"), ObjectNew: at("5")}) || !preds[0].Update(event.UpdateEvent{ObjectOld: at("5"), ObjectNew: at("6")}) {
		t.Error("ResourceVersionChanged: a resync passes, or a change does not")
	}
}
