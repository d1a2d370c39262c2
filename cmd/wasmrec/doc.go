// Command wasmrec runs Kubernetes controllers on the wasmrec host. `wasmrec dev` starts a
// local control plane and runs the example controllers on it; `wasmrec version` says what this
// build is.
package main
