// Package demo is the example `wasmrec dev` runs on the local control plane: an App custom
// resource whose controller keeps an owned ConfigMap in line with the App's spec and reports
// status, and a churn runnable that edits Apps and deletes ConfigMaps so there is something to
// watch.
package demo
