// Package resource holds Quantity, an amount of a resource (CPU, memory) in Kubernetes'
// notation: 100m, 1.5Gi, 2e3.
//
// Unlike k8s.io/apimachinery's Quantity, it keeps the text it was given, and does no
// arithmetic: it reads and writes objects exactly, compares quantities written alike, and checks
// their grammar, which is what a controller passing them through needs. Arithmetic would bring
// math/big into every module that has a Quantity field.
package resource
