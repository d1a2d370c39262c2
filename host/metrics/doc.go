// Package metrics holds the host's Prometheus metrics, under the names controller-runtime users
// already graph (controller_runtime_*, workqueue_*), plus the plugins' own (wasmrec_plugin_*).
// Each host has its own registry; Handler serves it.
package metrics
