// Package e2e holds the end-to-end tests: the host's controllers against a real kube-apiserver
// and etcd built into bin/ by `make controlplane`. Run them with `make test`.
//
// Tests run one after another, but for a few long ones that mostly wait (Lease expiries, builds,
// a control plane of their own) and cannot disturb or be disturbed by others: each of them keeps
// to namespaces and Leases of its own, runs its hosts with --plugin-objects=false or a control
// plane of its own, and asserts no timing tighter than a lease duration. They call t.Parallel,
// so they run together (-parallel, the number of CPUs by default) once the others are done. A
// test whose plugin watches every namespace, that counts what the whole cluster holds, or that
// times a schedule closely (backoffs, rollout steps) stays out of that set.
package e2e
