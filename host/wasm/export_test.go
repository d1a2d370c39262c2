package wasm

import (
	"context"
	"unsafe"

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

// IdleMemory is where the memory of one of m's idle instances is, and its size; 0, 0 if none
// is idle. It is an address, not a slice: the memory is unmapped when the instance closes.
func IdleMemory(m *Module) (addr uintptr, size uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.idle) == 0 {
		return 0, 0
	}
	b, _ := m.idle[0].mem.Read(0, m.idle[0].mem.Size())
	return uintptr(unsafe.Pointer(unsafe.SliceData(b))), uint32(len(b))
}

// Collections is how many forced collections e has run to give released code back.
func Collections(e *Engine) int { return e.reclaim.runsSoFar() }

// HoldsBytes says whether m holds its module's bytes in memory.
func HoldsBytes(m *Module) bool {
	m.codeMu.Lock()
	defer m.codeMu.Unlock()
	return m.wasm != nil
}
