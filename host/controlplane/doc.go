// Package controlplane starts a local kube-apiserver and etcd, built into bin/ by `make`, with
// controller-runtime's envtest, and kube-controller-manager beside them when asked. It is what
// `wasmrec dev` and the end-to-end tests run on.
package controlplane
