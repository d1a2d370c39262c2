// Package predicate filters events before they reach a handler: generation changed, label
// selector, namespace, annotation changed, and their And, Or and Not. The shapes follow
// controller-runtime's predicate package.
package predicate
