package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"k8s.io/utils/keymutex"

	"github.com/wasmrec/wasmrec/host/wasm/internal/linearmem"
)

// EngineOptions configure an Engine. The zero value is ready to use.
type EngineOptions struct {
	// CacheDir holds compiled modules across restarts. Defaults to the user cache directory's
	// wasmrec/wazero; "-" turns the on-disk cache off (a module is then compiled again each
	// time its code is loaded).
	CacheDir string
}

// Engine compiles plugin modules. One per host: its cache directory is shared by every
// module's runtime.
type Engine struct {
	cacheDir string // "" for none
	// compiling serialises the loads of the same bytes, so that the second finds the first's
	// code, or its machine code in the cache directory (see load). It is held for a whole
	// compile, seconds for a Go guest; mu is held for a moment by every load and release, so
	// that a Module letting go of its code never waits for a compile.
	compiling keymutex.KeyMutex
	mu        sync.Mutex       // guards codes and their refs
	codes     map[string]*code // by digest and settings
	reclaim   *reclaimer       // gives released code's memory back to the OS

	// instantiate is wazero.Runtime.InstantiateModule; tests replace it to inject faults.
	instantiate func(context.Context, wazero.Runtime, wazero.CompiledModule, wazero.ModuleConfig) (api.Module, error)
	// nanotime is the host's monotonic clock, in nanoseconds from any start: each instance's
	// monotonic clock is it, less its reading when the instance started. Tests replace it.
	nanotime func() int64
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
	e := &Engine{compiling: keymutex.NewHashed(compileLocks), codes: map[string]*code{}, instantiate: instantiate, nanotime: nanotime,
		reclaim: newReclaimer()}
	if dir == "-" {
		return e, nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wasm: compilation cache in %s: %w (set another directory, or \"-\" for none)", dir, err)
	}
	e.cacheDir = dir
	return e, c.Close(context.Background())
}

// newCache returns a compilation cache of the engine's directory, or of memory only. Each code
// has its own, closed with it: a cache is one wazero compiling engine, which keeps every
// module it compiled in a list it shortens by copying without clearing the slot it frees, so a
// cache shared by every code kept some let-go codes' machine code (60 MiB each for a typed Go
// guest) reachable for ever; closing the engine drops the list. What is shared across codes and
// restarts is the directory.
func (e *Engine) newCache() (wazero.CompilationCache, error) {
	if e.cacheDir == "" {
		return wazero.NewCompilationCache(), nil
	}
	return wazero.NewCompilationCacheWithDir(e.cacheDir)
}

// instantiate makes an instance whose linear memory is a mapping of its own, outside the Go
// heap (linearmem): it is unmapped when the instance closes, so nothing may read it after.
func instantiate(ctx context.Context, r wazero.Runtime, cm wazero.CompiledModule, cfg wazero.ModuleConfig) (api.Module, error) {
	return r.InstantiateModule(experimental.WithMemoryAllocator(ctx, linearmem.Allocator), cm, cfg)
}

// started is when the process started, as the monotonic clock reads it.
var started = time.Now()

// nanotime reads the process's monotonic clock, at full resolution.
func nanotime() int64 { return int64(time.Since(started)) }

// digestOf is the module digest of wasm, "sha256:<hex>".
func digestOf(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CacheDir returns where compiled modules are kept ("" for memory only).
func (e *Engine) CacheDir() string { return e.cacheDir }

// Close is a no-op kept for callers: each code's compilation cache is closed with the code (the
// files stay).
func (e *Engine) Close(context.Context) error { return nil }

// Inspect compiles wasm without running it and lists its exports and imports. The error says
// what keeps it from being an ABI v1 plugin, if anything; the Describe is filled either way
// when the bytes are a WebAssembly module.
func (e *Engine) Inspect(ctx context.Context, wasm []byte) (_ Describe, err error) {
	defer recoverPanic(&err)
	cache, err := e.newCache()
	if err != nil {
		return Describe{}, err
	}
	defer cache.Close(ctx)
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache))
	defer r.Close(ctx)
	lock := digestOf(wasm) + "/interruptible=false" // as load locks
	e.compiling.LockKey(lock)
	defer func() { _ = e.compiling.UnlockKey(lock) }()
	if err := checkBinary(wasm); err != nil {
		return Describe{}, err
	}
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return Describe{}, fmt.Errorf("not a valid WebAssembly module: %w", err)
	}
	return validate(cm)
}
