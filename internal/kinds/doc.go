// Package kinds knows the built-in Kubernetes kinds without a cluster: their resource names and
// scope, and the kind a misspelling most likely meant. `wasmrec new` uses it to fill a
// scaffold's grant, and the host to say "did you mean ConfigMap?" for a kind no API serves.
package kinds
