package wasmrec

import "github.com/wasmrec/wasmrec/abi"

// Predicate types, for Predicate.Type. A Watch's predicates filter the events of its kind;
// several in one list must all pass (abi/ABI.md, the manifest). The values are the manifest's
// JSON: {Type: PredicateGenerationChanged} is {"type": "GenerationChanged"}.
const (
	// PredicateGenerationChanged lets through updates that change metadata.generation, and
	// every create and delete.
	PredicateGenerationChanged = abi.PredicateGenerationChanged
	// PredicateResourceVersionChanged lets through updates that change
	// metadata.resourceVersion (not the host's informer resyncs, whose object is the one
	// already seen), and every create and delete, as controller-runtime's
	// ResourceVersionChangedPredicate.
	PredicateResourceVersionChanged = abi.PredicateResourceVersionChanged
	// PredicateAnnotationChanged lets through updates that change annotations, and every
	// create and delete.
	PredicateAnnotationChanged = abi.PredicateAnnotationChanged
	// PredicateLabelChanged lets through updates that change labels, and every create and
	// delete.
	PredicateLabelChanged = abi.PredicateLabelChanged
	// PredicateLabelSelector lets through events whose object matches Selector (required).
	PredicateLabelSelector = abi.PredicateLabelSelector
	// PredicateNamespace lets through events whose object is in one of Namespaces (required).
	PredicateNamespace = abi.PredicateNamespace
	// PredicateAnd lets through events every one of Predicates lets through (all, if none).
	PredicateAnd = abi.PredicateAnd
	// PredicateOr lets through events any one of Predicates lets through (none, if none).
	PredicateOr = abi.PredicateOr
	// PredicateNot lets through events its one predicate does not.
	PredicateNot = abi.PredicateNot
)

// Watch mappings, for Watch.Map (Watches only).
const (
	// MapSameName enqueues the For object with the watched object's namespace and name.
	MapSameName = abi.MapSameName
	// MapNamespace enqueues every For object in the watched object's namespace.
	MapNamespace = abi.MapNamespace
	// MapByFunc enqueues what the watch's map function returns; MapWatch makes such a watch.
	MapByFunc = abi.MapFunc
)
