// Package wasm runs plugin modules with wazero: it compiles a module (through an on-disk
// compilation cache), checks it against ABI v1, keeps a pool of instances (one per concurrent
// reconcile, never shared), calls its reconcile export and hands its host calls to a Host.
// An instance that traps, times out or answers garbage is thrown away.
package wasm
