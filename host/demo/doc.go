// Package demo holds what `wasmrec dev` sets up for the example plugins on the local control
// plane: the App custom resource, seed objects for every plugin, and a churn runnable that
// edits them so there is something to watch.
package demo
