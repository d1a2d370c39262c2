package binary

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// bin is the repository's bin/, where `make plugins testguests` puts the modules it builds.
var binDir = filepath.Join("..", "..", "..", "..", "bin")

// builtModules are the modules `make plugins testguests` built: real output of Go and clang.
func builtModules(t testing.TB) map[string][]byte {
	paths, _ := filepath.Glob(filepath.Join(binDir, "plugins", "*.wasm"))
	more, _ := filepath.Glob(filepath.Join(binDir, "testguests", "*.wasm"))
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

// testguest reads bin/testguests/<name>.wasm.
func testguest(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, "testguests", name+".wasm"))
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	return b
}

// Every module the toolchains build can be instrumented and stays valid. (That the flag is
// exported and stops a loop, host/wasm's misbehave tests show: a Module finds the flag on every
// instance it makes.)
func TestInstrumentLoops(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter()) // validates, cheaply
	defer r.Close(ctx)
	for name, b := range builtModules(t) {
		start := time.Now()
		out, _, err := InstrumentLoops(b)
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

// Whatever the input, InstrumentLoops does not panic, and what it returns for a module wazero
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
		out, _, err := InstrumentLoops(b)
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
	wasm, err := os.ReadFile(filepath.Join(binDir, "testguests", "bench-go.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, _, err := InstrumentLoops(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

// What InstrumentLoops cannot rewrite is refused with ErrNotInstrumentable (the module is then
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
		if _, _, err := InstrumentLoops(b); !errors.Is(err, ErrNotInstrumentable) {
			t.Errorf("%s: err = %v, want ErrNotInstrumentable", name, err)
		}
	}
	// A module exporting the name the host adds is refused as such, not as an invalid module.
	name := []byte(InterruptExport)
	exports := append([]byte{0x07, byte(len(name) + 4), 0x01, byte(len(name))}, name...)
	exports = append(exports, 0x00, 0x00) // func 0
	if _, _, err := InstrumentLoops(module(types, funcs, memory, exports, code(0x0b))); !errors.Is(err, ErrReservedExport) {
		t.Errorf("a module exporting %s: err = %v, want ErrReservedExport", InterruptExport, err)
	}
	// And the same module with a memory is instrumented.
	if _, _, err := InstrumentLoops(module(types, funcs, memory, code(0x03, 0x40, 0x0b, 0x0b))); err != nil {
		t.Errorf("a loop in a module with a memory: %v", err)
	}
}

// The instrumentation says which modules cannot start from a snapshot, and why, and exports the
// mutable globals of those that can.
func TestSnapshotPlan(t *testing.T) {
	header := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	section := func(id byte, payload ...byte) []byte {
		return append(binary.AppendUvarint([]byte{id}, uint64(len(payload))), payload...)
	}
	types := section(1, 0x01, 0x60, 0x00, 0x00)
	funcs := section(3, 0x01, 0x00)
	memory := section(5, 0x01, 0x00, 0x01)
	code := func(body ...byte) []byte {
		b := append([]byte{0x00}, body...)
		return section(10, append([]byte{0x01, byte(len(b))}, b...)...)
	}
	globals := section(6, 0x02,
		0x7f, 0x00, 0x41, 0x05, 0x0b, // immutable i32
		0x7e, 0x01, 0x42, 0x07, 0x0b) // mutable i64
	table := section(4, 0x01, 0x70, 0x00, 0x01)
	module := func(sections ...[]byte) []byte { return bytes.Join(append([][]byte{header}, sections...), nil) }
	for _, tc := range []struct {
		name   string
		module []byte
		why    string
	}{
		{"plain", module(types, funcs, memory, globals, code(0x0b)), ""},
		{"start section", module(types, funcs, memory, section(8, 0x00), code(0x0b)), "start section"},
		{"passive data", module(types, funcs, memory, code(0x0b), section(11, 0x01, 0x01, 0x01, 0xaa)), "passive data"},
		{"table.set", module(types, funcs, table, memory, code(0x41, 0x00, 0xd0, 0x70, 0x26, 0x00, 0x0b)), "changes tables"},
		{"table.grow", module(types, funcs, table, memory, code(0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, 0x1a, 0x0b)), "changes tables"},
		{"mutable v128", module(types, funcs, memory, section(6, 0x01, 0x7b, 0x01, 0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b), code(0x0b)), "vector or reference"},
	} {
		bin, plan, err := InstrumentLoops(tc.module)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if tc.why == "" && plan.Why != "" || !strings.Contains(plan.Why, tc.why) {
			t.Errorf("%s: why = %q, want %q", tc.name, plan.Why, tc.why)
		}
		if _, err := wazero.NewRuntime(context.Background()).CompileModule(context.Background(), bin); err != nil {
			t.Errorf("%s: the instrumented module is not valid: %v", tc.name, err)
		}
		if tc.name == "plain" {
			if want := []string{GlobalExportPrefix + "1"}; strings.Join(plan.Globals, ",") != strings.Join(want, ",") {
				t.Errorf("exported globals %q, want %q (the mutable one only)", plan.Globals, want)
			}
		}
	}
	name := []byte(GlobalExportPrefix + "mine")
	exports := section(7, append(append([]byte{0x01, byte(len(name))}, name...), 0x00, 0x00)...)
	if _, _, err := InstrumentLoops(module(types, funcs, memory, exports, code(0x0b))); err == nil || !strings.Contains(err.Error(), string(name)) {
		t.Errorf("a module exporting %q: err = %v, want ErrReservedExport naming it", name, err)
	}
}
