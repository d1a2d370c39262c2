package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"k8s.io/utils/keymutex"

	"github.com/wasmrec/wasmrec/host/wasm/internal/binary"
)

// EngineOptions configure an Engine. The zero value is ready to use.
type EngineOptions struct {
	// CacheDir holds compiled modules across restarts. Defaults to the user cache directory's
	// wasmrec/wazero; "-" turns the on-disk cache off (a module is then compiled again each
	// time its code is loaded).
	CacheDir string
	// Logger receives what the engine does on its own: giving closed modules' memory back.
	Logger logr.Logger
}

// Engine compiles plugin modules. One per host: its cache directory is shared by every
// module's runtime.
type Engine struct {
	cacheDir string // "" for none
	// compiling serialises the loads of the same bytes, so that the second finds the first's
	// code, or its machine code in the cache directory (see load).
	compiling keymutex.KeyMutex
	mu        sync.Mutex       // guards codes and their refs
	codes     map[string]*code // by digest and settings
	reclaim   *reclaimer       // gives closed instances' memory back to the OS

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
		reclaim: newReclaimer(opts.Logger)}
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

func instantiate(ctx context.Context, r wazero.Runtime, cm wazero.CompiledModule, cfg wazero.ModuleConfig) (api.Module, error) {
	return r.InstantiateModule(ctx, cm, cfg)
}

// started is when the process started, as the monotonic clock reads it.
var started = time.Now()

// nanotime reads the process's monotonic clock, at full resolution.
func nanotime() int64 { return int64(time.Since(started)) }

// code is a module compiled in a wazero runtime, shared by every Module that loads the same
// bytes with the same memory cap and interruption: wazero decodes a module again for each
// runtime (about 25 MiB for a 16 MB Go module), and the memory cap and interruption are
// settings of the runtime, so these are what a runtime can be shared by.
type code struct {
	key        string
	wasm       []byte // the module's bytes, shared by the Modules that load them
	refs       int    // guarded by Engine.mu
	cache      wazero.CompilationCache
	runtime    wazero.Runtime
	compiled   wazero.CompiledModule
	describe   Describe
	loopChecks bool // instrumented by binary.InstrumentLoops: yields to Go in loops, and has the flag global
	snapshots  binary.Plan
	// firstSnap is the first snapshot a Module took with this code: later ones share its
	// equal blocks.
	firstSnap atomic.Pointer[snapshot]
}

// codeKeys are what the loads of a module's code are serialised by (its bytes and interruption)
// and what its code is shared by (and its memory cap). opts has its defaults.
func codeKeys(digest string, opts Options) (lock, key string) {
	pages := uint32(min(opts.MemoryLimit/pageSize, 65536))
	lock = fmt.Sprintf("%s/interruptible=%t", digest, *opts.Interruptible)
	return lock, fmt.Sprintf("%s/pages=%d", lock, pages)
}

// holds says whether the engine holds the compiled code of the module digest under opts, which a
// new Module of it shares without compiling.
func (e *Engine) holds(digest string, opts Options) bool {
	_, key := codeKeys(digest, opts)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.codes[key] != nil
}

// load returns the code of wasm for opts, compiling it unless a Module already holds it. Loads
// of the same bytes run one at a time, whatever their settings: the second then takes the
// first's code, or (other settings) reads its machine code from the cache directory instead of
// compiling it again. It also kept clear of wazero issue #2547 while codes shared one
// compilation cache (a module read from the file cache was published to other runtimes before
// its entry preambles were compiled); each code now has its own (see newCache). Instantiation,
// the part that grows with plugins, stays concurrent.
func (e *Engine) load(ctx context.Context, wasm []byte, digest string, opts Options) (c *code, err error) {
	lock, key := codeKeys(digest, opts)
	e.compiling.LockKey(lock)
	defer func() { _ = e.compiling.UnlockKey(lock) }()
	e.mu.Lock()
	if c := e.codes[key]; c != nil {
		c.refs++
		e.mu.Unlock()
		return c, nil
	}
	e.mu.Unlock()

	if err := checkBinary(wasm); err != nil {
		return nil, err
	}
	interruptible := *opts.Interruptible
	pages := uint32(min(opts.MemoryLimit/pageSize, 65536))
	c = &code{key: key, refs: 1, wasm: wasm}
	// Every module gets the loop checks: their yield points keep a looping guest from holding
	// up the Go runtime's stop-the-world, whether or not the deadline may interrupt it.
	bin, closeOnDone := wasm, false
	var notInstrumented error // why the module is interrupted by wazero's mechanism instead
	if instrumented, plan, err := binary.InstrumentLoops(wasm); err == nil {
		bin, c.loopChecks, c.snapshots = instrumented, true, plan
	} else if errors.Is(err, ErrReservedExport) {
		return nil, err
	} else {
		closeOnDone, notInstrumented = interruptible, err
		c.snapshots = binary.Plan{Why: "the host could not instrument it: " + err.Error()}
	}
	cache, err := e.newCache()
	if err != nil {
		return nil, err
	}
	c.cache = cache
	cfg := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).
		WithCloseOnContextDone(closeOnDone).
		WithMemoryLimitPages(pages)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	c.runtime = rt
	var compiled wazero.CompiledModule
	defer func() {
		if err != nil { // c is nil by now; a refused module's machine code goes too (see release)
			if compiled != nil {
				_ = compiled.Close(context.WithoutCancel(ctx))
			}
			_ = rt.Close(context.WithoutCancel(ctx))
			_ = cache.Close(context.WithoutCancel(ctx))
		}
	}()
	defer recoverPanic(&err)
	if compiled, err = c.runtime.CompileModule(ctx, bin); err != nil {
		return nil, fmt.Errorf("not a valid WebAssembly module: %w", err)
	}
	c.compiled = compiled
	if c.describe, err = validate(c.compiled); err != nil {
		return nil, err
	}
	switch { // said only of a module that is valid
	case notInstrumented != nil && interruptible:
		opts.Logger.Info("interrupting this plugin with wazero's slower mechanism", "reason", notInstrumented.Error())
	case notInstrumented != nil:
		opts.Logger.Info("this plugin has no loop checks: if it loops, it stalls the whole host at the next garbage collection", "reason", notInstrumented.Error())
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, c.runtime); err != nil {
		return nil, err
	}
	if err := instantiateHostModule(ctx, c.runtime); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.codes[key] = c
	e.mu.Unlock()
	return c, nil
}

// release lets go of c, closing its runtime when no Module holds it any more.
func (e *Engine) release(ctx context.Context, c *code) error {
	e.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		delete(e.codes, c.key)
	}
	e.mu.Unlock()
	if !last {
		return nil
	}
	// With a compilation cache, closing a runtime leaves its compiled modules in the cache's
	// compiling engine: closing the compiled module and then the cache lets it drop their
	// machine code (tens of MiB for a Go guest).
	err := errors.Join(c.compiled.Close(ctx), c.runtime.Close(ctx), c.cache.Close(ctx))
	e.reclaim.soon()
	return err
}

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
