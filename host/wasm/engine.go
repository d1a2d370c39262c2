package wasm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tetratelabs/wazero"
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
}

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
	if dir == "-" {
		return &Engine{cache: wazero.NewCompilationCache()}, nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wasm: compilation cache in %s: %w (set another directory, or \"-\" for none)", dir, err)
	}
	return &Engine{cache: c, cacheDir: dir}, nil
}

// CacheDir returns where compiled modules are kept ("" for memory only).
func (e *Engine) CacheDir() string { return e.cacheDir }

// Close releases the compilation cache (the files stay).
func (e *Engine) Close(ctx context.Context) error { return e.cache.Close(ctx) }

// Inspect compiles wasm without running it and lists its exports and imports. The error says
// what keeps it from being an ABI v1 plugin, if anything; the Describe is filled either way
// when the bytes are a WebAssembly module.
func (e *Engine) Inspect(ctx context.Context, wasm []byte) (Describe, error) {
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(e.cache))
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return Describe{}, fmt.Errorf("not a valid WebAssembly module: %w", err)
	}
	return validate(cm)
}
