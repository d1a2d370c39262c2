package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"k8s.io/utils/keymutex"
)

// EngineOptions configure an Engine. The zero value is ready to use.
type EngineOptions struct {
	// CacheDir holds compiled modules across restarts. Defaults to the user cache directory's
	// wasmrec/wazero; "-" turns the on-disk cache off (compiled modules are still shared in
	// memory).
	CacheDir string
}

// Engine compiles plugin modules. One per host: its compilation cache is shared by every
// module's runtime.
type Engine struct {
	cache    wazero.CompilationCache
	cacheDir string
	// compiling serialises the compilations of the same code: wazero publishes a module read
	// from its file cache before it is complete (see compile).
	compiling keymutex.KeyMutex

	// instantiate is wazero.Runtime.InstantiateModule; tests replace it to inject faults.
	instantiate func(context.Context, wazero.Runtime, wazero.CompiledModule, wazero.ModuleConfig) (api.Module, error)
}

// compileLocks is how many locks the per-code compile lock hashes into: two different modules
// sharing one only wait for each other.
const compileLocks = 64

// NewEngine returns an Engine with its compilation cache.
func NewEngine(opts EngineOptions) (*Engine, error) {
	dir := opts.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "wasmrec", "wazero")
	}
	e := &Engine{compiling: keymutex.NewHashed(compileLocks), instantiate: instantiate}
	if dir == "-" {
		e.cache = wazero.NewCompilationCache()
		return e, nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wasm: compilation cache in %s: %w (set another directory, or \"-\" for none)", dir, err)
	}
	e.cache, e.cacheDir = c, dir
	return e, nil
}

func instantiate(ctx context.Context, r wazero.Runtime, cm wazero.CompiledModule, cfg wazero.ModuleConfig) (api.Module, error) {
	return r.InstantiateModule(ctx, cm, cfg)
}

// compile compiles code in r, one compilation of the same code (and termination mode) at a
// time across the engine's runtimes. wazero v1.12.0 shares a compiled module between runtimes
// through the compilation cache, and publishes one read from the file cache before its entry
// preambles are compiled: a runtime that finds it then instantiates it with none and panics
// (wazero issue #2547). Once CompileModule has returned, the module is complete, so holding
// the lock through compilation is enough. key names the code: its digest and how it is run.
func (e *Engine) compile(ctx context.Context, r wazero.Runtime, code []byte, key string) (wazero.CompiledModule, error) {
	e.compiling.LockKey(key)
	defer func() { _ = e.compiling.UnlockKey(key) }()
	return r.CompileModule(ctx, code)
}

// PanicError is a panic in the host (wazero's code or wasmrec's) while it served one plugin,
// recovered so that the other plugins and the host carry on.
type PanicError struct {
	Value any    // what was panicked with
	Stack []byte // the goroutine's stack where it panicked
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic in the host: %v (a bug in wasmrec or wazero: please report it with the stack logged beside this error)", e.Value)
}

// recoverPanic turns a panic into *err, a *PanicError; use it deferred.
func recoverPanic(err *error) {
	if r := recover(); r != nil {
		*err = &PanicError{Value: r, Stack: debug.Stack()}
	}
}

// digestOf is the module digest of wasm, "sha256:<hex>".
func digestOf(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CacheDir returns where compiled modules are kept ("" for memory only).
func (e *Engine) CacheDir() string { return e.cacheDir }

// Close releases the compilation cache (the files stay).
func (e *Engine) Close(ctx context.Context) error { return e.cache.Close(ctx) }

// Inspect compiles wasm without running it and lists its exports and imports. The error says
// what keeps it from being an ABI v1 plugin, if anything; the Describe is filled either way
// when the bytes are a WebAssembly module.
func (e *Engine) Inspect(ctx context.Context, wasm []byte) (_ Describe, err error) {
	defer recoverPanic(&err)
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(e.cache))
	defer r.Close(ctx)
	cm, err := e.compile(ctx, r, wasm, digestOf(wasm)+"/plain")
	if err != nil {
		return Describe{}, fmt.Errorf("not a valid WebAssembly module: %w", err)
	}
	return validate(cm)
}
