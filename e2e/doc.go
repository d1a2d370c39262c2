// Package e2e holds the end-to-end tests: the host's controllers against a real kube-apiserver
// and etcd built into bin/ by `make controlplane`. Run them with `make test`.
package e2e
