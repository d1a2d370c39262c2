// Command wasmopt optimizes a Go module in place as wasmrec build does (package build's
// Optimize: binaryen's wasm-opt -Oz -g), for the Makefile's example plugins and Go test guests,
// which it builds with the go command, so that the tests run what users ship.
//
//	wasmopt bin/plugins/app.wasm
package main
