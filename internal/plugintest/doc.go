// Package plugintest runs a plugin module's test cases, written as YAML, without a cluster: the
// module of any language runs on the host's own engine (host/wasm), its host calls answered by
// the fake cluster of the Go SDK (sdk/go/fake), and each case's Result, objects, Events and log
// lines are compared with what the case expects. It is what `wasmrec test` runs.
package plugintest
