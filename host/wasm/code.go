package wasm

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmrec/wasmrec/host/wasm/internal/binary"
)

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
	interruptible := *opts.Interruptible
	pages := uint32(min(opts.MemoryLimit/pageSize, 65536))
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

// releaseCode lets go of the module's code, if it holds it.
func (m *Module) releaseCode(ctx context.Context) error {
	m.codeMu.Lock()
	defer m.codeMu.Unlock()
	if m.unloadCode != nil {
		m.unloadCode.Stop()
		m.unloadCode = nil
	}
	c := m.code
	m.code, m.snap = nil, nil
	m.stats.snapshotBytes.Store(0)
	if c == nil {
		return nil
	}
	return m.engine.release(ctx, c)
}

// codeFor returns the module's code, loading it again if it was let go. The caller holds a
// token.
func (m *Module) codeFor(ctx context.Context) (*code, error) {
	m.codeMu.Lock()
	defer m.codeMu.Unlock()
	if m.code != nil {
		return m.code, nil
	}
	start := time.Now()
	wasm := m.wasm
	if wasm == nil {
		var err error
		if wasm, err = m.engine.unspill(m.digest); err != nil {
			return nil, err
		}
	}
	c, err := m.engine.load(ctx, wasm, m.digest, m.opts)
	if err != nil {
		return nil, fmt.Errorf("loading the compiled module again: %w", err)
	}
	m.code, m.wasm = c, c.wasm
	m.stats.codeReloads.Add(1)
	m.opts.Logger.V(1).Info("loaded the compiled module again", "took", time.Since(start).Round(time.Millisecond).String())
	return c, nil
}

// armCodeUnload arms the let-go of the code, the pool being empty. m.mu is held.
func (m *Module) armCodeUnload() {
	if m.opts.CodeIdleTimeout < 0 || m.closed {
		return
	}
	m.codeMu.Lock()
	defer m.codeMu.Unlock()
	if m.unloadCode == nil && m.code != nil {
		m.unloadCode = time.AfterFunc(m.opts.CodeIdleTimeout, m.unloadIdleCode)
	}
}

// unloadIdleCode lets go of the code if no instance is alive or being made: it takes every
// token at once, or leaves the code to the reconciles that hold one.
func (m *Module) unloadIdleCode() {
	taken := 0
	defer func() {
		for range taken {
			m.tokens <- struct{}{}
		}
	}()
	for range cap(m.tokens) {
		select {
		case <-m.tokens:
			taken++
			continue
		default:
		}
		break
	}
	m.codeMu.Lock()
	m.unloadCode = nil
	m.codeMu.Unlock()
	m.mu.Lock()
	idle := taken == cap(m.tokens) && len(m.idle) == 0 && m.stats.live.Load() == 0 && !m.closed
	m.mu.Unlock()
	if !idle {
		return
	}
	m.codeMu.Lock()
	c := m.code
	m.code, m.snap = nil, nil
	m.stats.snapshotBytes.Store(0)
	if c != nil && m.engine.spill(m.digest, m.wasm) {
		m.wasm = nil
	}
	m.codeMu.Unlock()
	if c == nil {
		return
	}
	m.stats.codeReleases.Add(1)
	if err := m.engine.release(context.Background(), c); err != nil {
		m.opts.Logger.Error(err, "letting go of the compiled module")
		return
	}
	m.opts.Logger.V(1).Info("let go of the compiled module: no instance for the code idle timeout", "codeIdleTimeout", m.opts.CodeIdleTimeout.String())
}
