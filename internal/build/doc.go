// Package build compiles a plugin's folder to a module: Go with GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared, C with clang, wasi-libc and the C SDK that comes with wasmrec. It is what
// `wasmrec build` and `wasmrec dev --plugin` run.
package build
