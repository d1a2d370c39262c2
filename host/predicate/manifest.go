package predicate

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/abi"
)

// FromManifest is the predicates a manifest's watch names (abi.Predicate), as the host applies
// them.
func FromManifest(ps []abi.Predicate) ([]Predicate, error) {
	out := make([]Predicate, 0, len(ps))
	for _, p := range ps {
		q, err := convert(p)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

func convert(p abi.Predicate) (Predicate, error) {
	switch p.Type {
	case abi.PredicateGenerationChanged:
		return GenerationChanged(), nil
	case abi.PredicateResourceVersionChanged:
		return ResourceVersionChanged(), nil
	case abi.PredicateAnnotationChanged:
		return AnnotationChanged(), nil
	case abi.PredicateLabelChanged:
		return LabelChanged(), nil
	case abi.PredicateNamespace:
		return Namespace(p.Namespaces...), nil
	case abi.PredicateLabelSelector:
		var sel metav1.LabelSelector
		b, _ := json.Marshal(p.Selector)
		if err := json.Unmarshal(b, &sel); err != nil {
			return nil, err
		}
		return LabelSelector(sel)
	case abi.PredicateAnd, abi.PredicateOr, abi.PredicateNot:
		inner, err := FromManifest(p.Predicates)
		if err != nil {
			return nil, err
		}
		switch p.Type {
		case abi.PredicateAnd:
			return And(inner...), nil
		case abi.PredicateOr:
			return Or(inner...), nil
		}
		return Not(inner[0]), nil
	}
	return nil, fmt.Errorf("unknown predicate type %q", p.Type)
}
