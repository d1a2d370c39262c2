// Package binary reads and rewrites WebAssembly binary modules before the host compiles them:
// the loop checks that let the host interrupt a guest and make it yield to the Go runtime, the
// merging of a module's data segments, and the exports of its mutable globals that snapshots
// read and set. One pass a file, beside the reader they share; InstrumentLoops runs them all.
package binary
