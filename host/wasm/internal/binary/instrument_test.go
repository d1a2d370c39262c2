package binary

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

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

// fn encodes a function body with its size, as a code section holds it.
func fn(body ...byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(body))), body...) }

// The flag and counter globals and the flag's export go in sections of their own, in their
// place among the others, when the module has none; DWARF sections are dropped, other custom
// sections kept where they were.
func TestInstrumentLoopsAddsSections(t *testing.T) {
	types := sec(1, 0x01, 0x60, 0x00, 0x00)
	funcs := sec(3, 0x01, 0x00)
	memory := sec(5, 0x01, 0x00, 0x01)
	names := sec(0, cat(name("name"), []byte{0x01, 0x02})...)
	loop := []byte{0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}
	out, plan, err := InstrumentLoops(module(types, funcs, memory, sec(0, name(".debug_info")...), names, sec(10, vector(fn(loop...))...)))
	if err != nil {
		t.Fatal(err)
	}
	want := module(types, funcs, memory, names,
		sec(6, vector(
			[]byte{0x7f, 0x01, 0x41, 0x00, 0x0b},       // the flag, 0
			[]byte{0x7f, 0x01, 0x41, 0x80, 0x20, 0x0b}, // the counter, yieldEvery
		)...),
		sec(7, vector(cat(name(InterruptExport), []byte{0x03, 0x00}))...),
		sec(10, vector(fn(cat([]byte{0x00, 0x03, 0x40}, check(0, 1), []byte{0x0c, 0x00, 0x0b, 0x0b})...))...),
	)
	if !bytes.Equal(out, want) {
		t.Errorf("instrumented\n%x\nwant\n%x", out, want)
	}
	if plan.Why != "" || plan.Globals != nil {
		t.Errorf("plan %+v, want one of nothing", plan)
	}
}

// In a module with globals of its own, imported and defined, the flag and the counter come
// after them, and their sections and the export section are added to; the data count follows
// the data segments as they are merged.
func TestInstrumentLoopsAddsToSections(t *testing.T) {
	types := sec(1, 0x01, 0x60, 0x00, 0x00)
	imports := sec(2, vector(cat(name("env"), name("g"), []byte{0x03, 0x7f, 0x00}))...) // immutable i32
	funcs := sec(3, 0x01, 0x00)
	memory := sec(5, 0x01, 0x00, 0x01)
	global := []byte{0x7e, 0x01, 0x42, 0x00, 0x0b} // mutable i64: global 1
	exportF := cat(name("f"), []byte{0x00, 0x00})
	seg := func(off byte, data ...byte) []byte {
		return append([]byte{0x00, 0x41, off, 0x0b, byte(len(data))}, data...)
	}
	plain := []byte{0x00, 0x0b}
	out, plan, err := InstrumentLoops(module(types, imports, funcs, memory,
		sec(6, vector(global)...),
		sec(7, vector(exportF)...),
		sec(12, 0x02),
		sec(10, vector(fn(plain...))...),
		sec(11, vector(seg(0, 1), seg(1, 2))...),
	))
	if err != nil {
		t.Fatal(err)
	}
	want := module(types, imports, funcs, memory,
		sec(6, vector(global,
			[]byte{0x7f, 0x01, 0x41, 0x00, 0x0b},       // the flag: global 2
			[]byte{0x7f, 0x01, 0x41, 0x80, 0x20, 0x0b}, // the counter: global 3
		)...),
		sec(7, vector(exportF,
			cat(name(InterruptExport), []byte{0x03, 0x02}),
			cat(name(GlobalExportPrefix+"1"), []byte{0x03, 0x01}),
		)...),
		sec(12, 0x01),
		sec(10, vector(fn(plain...))...),
		sec(11, vector(seg(0, 1, 2))...),
	)
	if !bytes.Equal(out, want) {
		t.Errorf("instrumented\n%x\nwant\n%x", out, want)
	}
	if !slices.Equal(plan.Globals, []string{GlobalExportPrefix + "1"}) || !strings.Contains(plan.Why, "imports a memory or a global") {
		t.Errorf("plan %+v, want global 1 exported, and no snapshot for its import", plan)
	}
}

// What the rewrite adds does what it is for: a loop runs while the flag is clear, and once it
// is set, any loop traps within yieldEvery iterations, an endless one included.
func TestInstrumentedLoopsStop(t *testing.T) {
	ctx := context.Background()
	spin := []byte{0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}              // loop br 0 end
	count := []byte{0x01, 0x01, 0x7f, 0x41, 0x90, 0xce, 0x00, 0x21, 0x00, // i32 $i = 10000
		0x03, 0x40, 0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, 0x0b, 0x0b} // loop: br_if (--$i) 0
	out, _, err := InstrumentLoops(module(
		sec(1, 0x01, 0x60, 0x00, 0x00),
		sec(3, 0x02, 0x00, 0x00),
		sec(5, 0x01, 0x00, 0x01),
		sec(7, vector(cat(name("spin"), []byte{0x00, 0x00}), cat(name("count"), []byte{0x00, 0x01}))...),
		sec(10, vector(fn(spin...), fn(count...))...),
	))
	if err != nil {
		t.Fatal(err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, out)
	if err != nil {
		t.Fatalf("the instrumented module does not compile: %v", err)
	}
	// An instance each: one that trapped left its counter at 0, where the next loop would not
	// check it again for 2^32 iterations. The host never runs such an instance again.
	for i, f := range []string{"count", "spin"} {
		mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(f))
		if err != nil {
			t.Fatal(err)
		}
		flag, ok := mod.ExportedGlobal(InterruptExport).(api.MutableGlobal)
		if !ok || flag.Get() != 0 {
			t.Fatalf("the flag global is not exported as a mutable one, or not 0: %v", mod.ExportedGlobal(InterruptExport))
		}
		if i == 0 {
			if _, err := mod.ExportedFunction(f).Call(ctx); err != nil {
				t.Fatalf("%s with the flag clear: %v", f, err)
			}
		}
		flag.Set(1)
		if _, err := mod.ExportedFunction(f).Call(ctx); err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("%s with the flag set: err = %v, want the trap", f, err)
		}
	}
}
