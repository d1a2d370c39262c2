// Package recording holds recorded reconciles: the format (a Recording, the Steps before it on
// its instance) and a bounded, per-plugin store of them on disk. ABI.md's "Recordings" section
// specifies the format for other tools.
//
// A wasm guest sees the world only through its host: the request, each host call's answer, the
// WASI clocks and random bytes. A Step holds all of them in the order the guest met them, so
// that the same module, in the same state, run on them again, does the same thing (see
// wasm.Module.Replay). An instance's state is what its earlier steps left: a recording names
// them, from the instance's _initialize on.
package recording
