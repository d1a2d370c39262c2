// Command wasmrec runs Kubernetes controllers on the wasmrec host. `wasmrec dev` starts a
// local control plane and runs the example controllers on it; `wasmrec test` runs a plugin's
// YAML test cases without a cluster; `wasmrec version` says what this build is.
package main
