// Package host is the Go side of wasmrec: the manager, controllers, informer caches and work
// queues that run reconcilers, whether written in Go or loaded as WebAssembly plugins.
//
// Subpackages, one job each (doc_test.go fails when one is missing here):
//
//   - reconcile: the Reconciler seam, Request, Result and terminal errors.
//   - manager: runnable groups started in order and stopped in reverse.
//   - controller: a rate-limited queue, workers and the Result semantics.
//   - cache: shared informers keyed by GVK, refcounted and removable.
//   - object: an API object as the host holds it, metadata beside the JSON, and its REST client.
//   - source, handler, predicate, event: how informer events become queued requests.
//   - crd: installing CustomResourceDefinitions from YAML and waiting until they are served.
//   - crdwatch: which kinds are served now, and runnables that follow their CRDs.
//   - controlplane: a local kube-apiserver and etcd for development and tests.
//   - wasm: the wazero runtime: compile, check against the ABI, instance pools, the reconcile call.
//   - wasm/internal/binary: the wasm binary reader and the rewrites made before compiling, a pass
//     a file.
//   - wasm/internal/linearmem: instances' memories as mappings of their own, outside the Go heap.
//   - recording: recorded reconciles: their format, which a plugin keeps, a bounded store.
//   - plugin: a module as a controller: config, load, hot swap, rollouts, identities.
//   - pluginobjects: the Plugin and ClusterPlugin kinds: CRDs, admission policy, their controller.
//   - plugin/internal/policy: the one permission policy.
//   - plugin/internal/hostcalls: the host's side of the guest's host calls.
//   - plugin/internal/watches: a manifest as a controller's sources.
//   - plugin/internal/informers: the informers a plugin holds, and what for.
//   - plugin/internal/modsource: where modules come from, and the triggers that swap them.
//   - plugin/internal/versions: the versions a plugin keeps compiled, and those it refused.
//   - plugin/internal/rollout: the steps, shares, figures and judgement of a rollout.
//   - oci: modules in OCI registries and image layouts.
//   - signature, signature/signaturetest: who signed a module; an offline Sigstore for tests.
//   - ownership, shard: replicas sharing plugins and shards through Leases; how shards are cut
//     and named.
//   - ownership/internal/placement: what a replica takes and lets go of, as a pure function.
//   - internal/filewatch: one file watcher for the whole host.
//   - internal/review: who a bearer token is and what its user may do, asked of the API server.
//   - apiready: the API server's own readiness (an etcd outage).
//   - metrics, tracing: Prometheus metrics; OpenTelemetry traces.
//   - demo: the CRD, seed objects and churn `wasmrec dev` shows.
package host
