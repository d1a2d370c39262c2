// Package event defines the events an informer delivers to handlers and predicates: create,
// update, delete and generic, each carrying the objects as metav1.Object and runtime.Object.
package event
