// Package host is the Go side of wasmrec: the manager, controllers, informer caches and work
// queues that run reconcilers, whether written in Go or loaded as WebAssembly plugins.
//
// Subpackages, one job each:
//
//   - reconcile: the Reconciler seam, Request, Result and terminal errors.
//   - manager: runnable groups started in order and stopped in reverse.
//   - controller: a rate-limited queue, workers and the Result semantics.
//   - cache: shared informers keyed by GVK, refcounted and removable.
//   - object: an API object as the host holds it, metadata beside the JSON, and its REST client.
//   - source, handler, predicate, event: how informer events become queued requests.
//   - crd: installing CustomResourceDefinitions from YAML and waiting until they are served.
//   - controlplane: a local kube-apiserver and etcd for development and tests.
//   - wasm: the wazero runtime: compile, check against the ABI, instance pools, the reconcile call.
//   - plugin: a module as a controller: config, load, hot swap, identities; plugin/objects runs
//     the plugins Plugin objects describe. Under plugin/internal: the permission policy, the
//     guest's host calls, module sources and their triggers, and the versions kept or refused.
//   - oci, crdwatch, apiready, metrics, tracing, demo: modules in registries, which kinds are
//     served, the API server's own readiness, metrics, traces, and what `wasmrec dev` shows.
package host
