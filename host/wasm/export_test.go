package wasm

import (
	"context"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// SetInstantiate replaces how e instantiates modules, for tests that inject faults.
func SetInstantiate(e *Engine, f func(context.Context, wazero.Runtime, wazero.CompiledModule, wazero.ModuleConfig) (api.Module, error)) {
	e.instantiate = f
}

// SetNanotime replaces the host's monotonic clock e gives instances theirs from, for tests that
// must not wait for time to pass.
func SetNanotime(e *Engine, f func() int64) { e.nanotime = f }

// Instantiate is what an Engine instantiates modules with.
var Instantiate = instantiate

// SharesCode tells whether two modules run on the same compiled code and runtime.
func SharesCode(a, b *Module) bool { return a.code == b.code }

// IdleMemory is the memory of one of m's idle instances, nil if none is idle.
func IdleMemory(m *Module) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.idle) == 0 {
		return nil
	}
	b, _ := m.idle[0].mem.Read(0, m.idle[0].mem.Size())
	return b
}

// Reclaiming is how many closed instances' memory e waits to see collected, and how many forced
// collections it has run.
func Reclaiming(e *Engine) (pending, runs int) { return e.reclaim.state() }

// HoldsBytes says whether m holds its module's bytes in memory.
func HoldsBytes(m *Module) bool {
	m.codeMu.Lock()
	defer m.codeMu.Unlock()
	return m.wasm != nil
}
