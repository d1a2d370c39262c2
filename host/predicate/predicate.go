package predicate

import (
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wasmrec/wasmrec/host/event"
)

// Predicate decides, per kind of event, whether it reaches the handler.
type Predicate interface {
	Create(event.CreateEvent) bool
	Update(event.UpdateEvent) bool
	Delete(event.DeleteEvent) bool
	Generic(event.GenericEvent) bool
}

// Funcs is a Predicate built from functions; a nil function lets its events through.
type Funcs struct {
	CreateFunc  func(event.CreateEvent) bool
	UpdateFunc  func(event.UpdateEvent) bool
	DeleteFunc  func(event.DeleteEvent) bool
	GenericFunc func(event.GenericEvent) bool
}

var _ Predicate = Funcs{}

// Create calls CreateFunc, or returns true.
func (p Funcs) Create(e event.CreateEvent) bool { return p.CreateFunc == nil || p.CreateFunc(e) }

// Update calls UpdateFunc, or returns true.
func (p Funcs) Update(e event.UpdateEvent) bool { return p.UpdateFunc == nil || p.UpdateFunc(e) }

// Delete calls DeleteFunc, or returns true.
func (p Funcs) Delete(e event.DeleteEvent) bool { return p.DeleteFunc == nil || p.DeleteFunc(e) }

// Generic calls GenericFunc, or returns true.
func (p Funcs) Generic(e event.GenericEvent) bool {
	return p.GenericFunc == nil || p.GenericFunc(e)
}

// NewPredicateFuncs applies one filter on the object to every kind of event; for updates it
// looks at the new object.
func NewPredicateFuncs(filter func(event.Object) bool) Funcs {
	return Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return filter(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return filter(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return filter(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return filter(e.Object) },
	}
}

// GenerationChanged lets an update through only when metadata.generation changed, that is when
// the spec changed: status and metadata-only updates are dropped. Other events pass.
func GenerationChanged() Predicate {
	return Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		return e.ObjectNew.GetGeneration() != e.ObjectOld.GetGeneration()
	}}
}

// ResourceVersionChanged lets an update through only when metadata.resourceVersion changed: it
// drops the updates an informer's resync makes, whose object is the one already seen. Other
// events pass.
func ResourceVersionChanged() Predicate {
	return Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		return e.ObjectNew.GetResourceVersion() != e.ObjectOld.GetResourceVersion()
	}}
}

// AnnotationChanged lets an update through only when the annotations changed. Other events pass.
func AnnotationChanged() Predicate {
	return Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		return !maps.Equal(e.ObjectNew.GetAnnotations(), e.ObjectOld.GetAnnotations())
	}}
}

// LabelChanged lets an update through only when the labels changed. Other events pass.
func LabelChanged() Predicate {
	return Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		return !maps.Equal(e.ObjectNew.GetLabels(), e.ObjectOld.GetLabels())
	}}
}

// LabelSelector lets through the events whose object matches the selector.
func LabelSelector(s metav1.LabelSelector) (Predicate, error) {
	sel, err := metav1.LabelSelectorAsSelector(&s)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector %q: %w", metav1.FormatLabelSelector(&s), err)
	}
	return NewPredicateFuncs(func(o event.Object) bool {
		return sel.Matches(labels.Set(o.GetLabels()))
	}), nil
}

// Namespace lets through the events whose object is in one of the namespaces.
func Namespace(namespaces ...string) Predicate {
	set := make(map[string]struct{}, len(namespaces))
	for _, ns := range namespaces {
		set[ns] = struct{}{}
	}
	return NewPredicateFuncs(func(o event.Object) bool {
		_, ok := set[o.GetNamespace()]
		return ok
	})
}

// And lets an event through when every predicate does (and when there are none).
func And(ps ...Predicate) Predicate {
	return Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return all(ps, func(p Predicate) bool { return p.Create(e) }) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return all(ps, func(p Predicate) bool { return p.Update(e) }) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return all(ps, func(p Predicate) bool { return p.Delete(e) }) },
		GenericFunc: func(e event.GenericEvent) bool { return all(ps, func(p Predicate) bool { return p.Generic(e) }) },
	}
}

// Or lets an event through when any predicate does (and never when there are none).
func Or(ps ...Predicate) Predicate {
	return Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return anyOf(ps, func(p Predicate) bool { return p.Create(e) }) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return anyOf(ps, func(p Predicate) bool { return p.Update(e) }) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return anyOf(ps, func(p Predicate) bool { return p.Delete(e) }) },
		GenericFunc: func(e event.GenericEvent) bool { return anyOf(ps, func(p Predicate) bool { return p.Generic(e) }) },
	}
}

// Not lets an event through when p does not.
func Not(p Predicate) Predicate {
	return Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return !p.Create(e) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return !p.Update(e) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return !p.Delete(e) },
		GenericFunc: func(e event.GenericEvent) bool { return !p.Generic(e) },
	}
}

func all(ps []Predicate, f func(Predicate) bool) bool {
	for _, p := range ps {
		if !f(p) {
			return false
		}
	}
	return true
}

func anyOf(ps []Predicate, f func(Predicate) bool) bool {
	for _, p := range ps {
		if f(p) {
			return true
		}
	}
	return false
}
