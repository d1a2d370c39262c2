package predicate_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/predicate"
)

func obj(ns string, gen int64, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetNamespace(ns)
	u.SetName("x")
	u.SetGeneration(gen)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

func withRV(u *unstructured.Unstructured, rv string) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.SetResourceVersion(rv)
	return u
}

func update(old, new *unstructured.Unstructured) event.UpdateEvent {
	return event.UpdateEvent{ObjectOld: old, ObjectNew: new}
}

func TestUpdatePredicates(t *testing.T) {
	base := obj("a", 1, map[string]string{"app": "web"}, map[string]string{"note": "1"})
	for _, tc := range []struct {
		name string
		p    predicate.Predicate
		e    event.UpdateEvent
		want bool
	}{
		{"generation changed", predicate.GenerationChanged(), update(base, obj("a", 2, nil, nil)), true},
		{"generation same (status or metadata only)", predicate.GenerationChanged(), update(base, obj("a", 1, map[string]string{"x": "y"}, nil)), false},
		{"resourceVersion changed", predicate.ResourceVersionChanged(), update(withRV(base, "7"), withRV(obj("a", 1, nil, nil), "8")), true},
		{"resourceVersion same (a resync)", predicate.ResourceVersionChanged(), update(withRV(base, "7"), withRV(base, "7")), false},
		{"annotation changed", predicate.AnnotationChanged(), update(base, obj("a", 1, nil, map[string]string{"note": "2"})), true},
		{"annotation same", predicate.AnnotationChanged(), update(base, obj("a", 5, nil, map[string]string{"note": "1"})), false},
		{"label changed", predicate.LabelChanged(), update(base, obj("a", 1, map[string]string{"app": "db"}, nil)), true},
		{"label same", predicate.LabelChanged(), update(base, obj("a", 2, map[string]string{"app": "web"}, nil)), false},
		{"or: one holds", predicate.Or(predicate.GenerationChanged(), predicate.AnnotationChanged()), update(base, obj("a", 1, nil, nil)), true},
		{"or: none holds", predicate.Or(predicate.GenerationChanged(), predicate.AnnotationChanged()), update(base, obj("a", 1, nil, map[string]string{"note": "1"})), false},
		{"and: both hold", predicate.And(predicate.GenerationChanged(), predicate.Namespace("a")), update(base, obj("a", 2, nil, nil)), true},
		{"and: one fails", predicate.And(predicate.GenerationChanged(), predicate.Namespace("b")), update(base, obj("a", 2, nil, nil)), false},
		{"not", predicate.Not(predicate.GenerationChanged()), update(base, obj("a", 2, nil, nil)), false},
		{"empty and lets through", predicate.And(), update(base, base), true},
		{"empty or stops", predicate.Or(), update(base, base), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Update(tc.e); got != tc.want {
				t.Fatalf("Update = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUpdateOnlyPredicatesPassOtherEvents(t *testing.T) {
	o := obj("a", 1, nil, nil)
	for _, p := range []predicate.Predicate{predicate.GenerationChanged(), predicate.ResourceVersionChanged(), predicate.AnnotationChanged(), predicate.LabelChanged()} {
		if !p.Create(event.CreateEvent{Object: o}) || !p.Delete(event.DeleteEvent{Object: o}) || !p.Generic(event.GenericEvent{Object: o}) {
			t.Fatalf("%T dropped a non-update event", p)
		}
	}
}

func TestLabelSelectorAndNamespace(t *testing.T) {
	sel, err := predicate.LabelSelector(metav1.LabelSelector{
		MatchLabels:      map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "edge"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"app": "web", "tier": "front"}, true},
		{map[string]string{"app": "web", "tier": "back"}, false},
		{map[string]string{"app": "web"}, false},
		{nil, false},
	} {
		o := obj("a", 1, tc.labels, nil)
		if got := sel.Create(event.CreateEvent{Object: o}); got != tc.want {
			t.Errorf("labels %v: Create = %v, want %v", tc.labels, got, tc.want)
		}
		if got := sel.Update(update(obj("a", 1, nil, nil), o)); got != tc.want {
			t.Errorf("labels %v: Update (new object) = %v, want %v", tc.labels, got, tc.want)
		}
	}

	ns := predicate.Namespace("a", "b")
	if !ns.Delete(event.DeleteEvent{Object: obj("b", 1, nil, nil)}) || ns.Delete(event.DeleteEvent{Object: obj("c", 1, nil, nil)}) {
		t.Fatal("Namespace predicate let the wrong namespaces through")
	}
}

func TestInvalidLabelSelector(t *testing.T) {
	_, err := predicate.LabelSelector(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Sometimes"}}})
	if err == nil {
		t.Fatal("an invalid operator was accepted")
	}
}
