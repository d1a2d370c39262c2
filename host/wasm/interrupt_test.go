package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// builtModules are the modules `make plugins testguests` built: real output of Go and clang.
func builtModules(t testing.TB) map[string][]byte {
	paths, _ := filepath.Glob("../../bin/plugins/*.wasm")
	more, _ := filepath.Glob("../../bin/testguests/*.wasm")
	paths = append(paths, more...)
	if len(paths) < 10 {
		testenv.Missing(t, fmt.Errorf("found %d modules under bin/", len(paths)), "plugins testguests")
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// Every module the toolchains build can be instrumented and stays valid. (That the flag is
// exported and stops a loop, the misbehave tests show: a Module finds the flag on every
// instance it makes.)
func TestInstrumentLoops(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter()) // validates, cheaply
	defer r.Close(ctx)
	for name, b := range builtModules(t) {
		start := time.Now()
		out, _, err := instrumentLoops(b)
		took := time.Since(start)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := r.CompileModule(ctx, out); err != nil {
			t.Errorf("%s: the instrumented module does not compile: %v", name, err)
			continue
		}
		t.Logf("%s: %d -> %d bytes (%.1f ms)", name, len(b), len(out), float64(took.Microseconds())/1000)
	}
}

// Whatever the input, instrumentLoops does not panic, and what it returns for a module wazero
// accepts, wazero accepts too.
func FuzzInstrumentLoops(f *testing.F) {
	for _, b := range builtModules(f) {
		if len(b) < 128<<10 { // the small C modules; the Go ones are too large to mutate usefully
			f.Add(b)
		}
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := instrumentLoops(b)
		if err != nil {
			return
		}
		if _, err := r.CompileModule(ctx, b); err != nil {
			return
		}
		if _, err := r.CompileModule(ctx, out); err != nil {
			t.Fatalf("the module compiles, its instrumented form does not: %v", err)
		}
	})
}

func BenchmarkInstrumentLoops(b *testing.B) {
	wasm, err := os.ReadFile("../../bin/testguests/bench-go.wasm")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, _, err := instrumentLoops(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

// What instrumentLoops cannot rewrite is refused with errNotInstrumentable (the module is then
// interrupted by wazero's mechanism), never mangled.
func TestInstrumentLoopsRefuses(t *testing.T) {
	header := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	types := []byte{0x01, 0x04, 0x01, 0x60, 0x00, 0x00} // () -> ()
	funcs := []byte{0x03, 0x02, 0x01, 0x00}             // one function of type 0
	memory := []byte{0x05, 0x03, 0x01, 0x00, 0x01}      // one memory, min 1 page
	code := func(body ...byte) []byte {                 // one function body, no locals
		b := append([]byte{0x00}, body...)
		return append([]byte{0x0a, byte(len(b) + 2), 0x01, byte(len(b))}, b...)
	}
	module := func(sections ...[]byte) []byte {
		out := append([]byte(nil), header...)
		for _, s := range sections {
			out = append(out, s...)
		}
		return out
	}
	for name, b := range map[string][]byte{
		"no memory":        module(types, funcs, code(0x03, 0x40, 0x0b, 0x0b)),
		"return_call":      module(types, funcs, memory, code(0x12, 0x00, 0x0b)),
		"truncated body":   module(types, funcs, memory, code(0x41)),
		"not wasm":         []byte("not a module"),
		"truncated module": module(types, funcs, memory, code(0x03, 0x40, 0x0b, 0x0b))[:20],
	} {
		if _, _, err := instrumentLoops(b); !errors.Is(err, errNotInstrumentable) {
			t.Errorf("%s: err = %v, want errNotInstrumentable", name, err)
		}
	}
	// A module exporting the name the host adds is refused as such, not as an invalid module.
	name := []byte(interruptExport)
	exports := append([]byte{0x07, byte(len(name) + 4), 0x01, byte(len(name))}, name...)
	exports = append(exports, 0x00, 0x00) // func 0
	if _, _, err := instrumentLoops(module(types, funcs, memory, exports, code(0x0b))); !errors.Is(err, ErrReservedExport) {
		t.Errorf("a module exporting %s: err = %v, want ErrReservedExport", interruptExport, err)
	}
	// And the same module with a memory is instrumented.
	if _, _, err := instrumentLoops(module(types, funcs, memory, code(0x03, 0x40, 0x0b, 0x0b))); err != nil {
		t.Errorf("a loop in a module with a memory: %v", err)
	}
}
