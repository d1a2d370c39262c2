package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// testguest reads bin/testguests/<name>.wasm.
func testguest(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "bin", "testguests", name+".wasm"))
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	return b
}

// An instance started from a snapshot holds, before anything runs in it, exactly the memory and
// mutable globals the snapshot's instance held right after its _initialize.
func TestSnapshotRestoresTheInitialisedState(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(EngineOptions{CacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	for _, guest := range []string{"hash-go", "benchc"} {
		t.Run(guest, func(t *testing.T) {
			off := false // instances run _initialize and take no snapshot: the test takes it
			m, err := e.Compile(ctx, testguest(t, guest), Options{Name: guest, Snapshots: &off})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			c := m.code
			if c.snapshots.why != "" {
				t.Fatalf("%s cannot be snapshotted: %s", guest, c.snapshots.why)
			}
			<-m.tokens
			source, err := m.newInstance(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer m.put(source, false)
			var snap *snapshot
			if err := m.withBaseMemory(ctx, c, func(base []byte) (err error) {
				snap, err = takeSnapshot(source, c.snapshots, base, 1, nil)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			want, _ := source.mem.Read(0, source.mem.Size())

			copied, err := e.instantiate(ctx, c.runtime, c.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
			if err != nil {
				t.Fatal(err)
			}
			defer copied.Close(ctx)
			if got, _ := copied.Memory().Read(0, copied.Memory().Size()); bytes.Equal(got, want) && guest == "hash-go" {
				t.Fatal("a Go guest's memory is the same before and after _initialize: the test shows nothing")
			}
			if err := snap.restore(copied, c.snapshots); err != nil {
				t.Fatal(err)
			}
			if got, _ := copied.Memory().Read(0, copied.Memory().Size()); !bytes.Equal(got, want) {
				t.Errorf("restored memory (%d bytes) differs from the initialised instance's (%d bytes)", len(got), len(want))
			}
			for _, name := range c.snapshots.globals {
				if got, want := copied.ExportedGlobal(name).Get(), source.mod.ExportedGlobal(name).Get(); got != want {
					t.Errorf("global %s = %d, want %d", name, got, want)
				}
			}
			t.Logf("%s: memory %d KiB, snapshot %d KiB in %d runs, %d globals", guest, len(want)>>10, snap.size>>10, len(snap.runs), len(snap.globals))

			// A second instance's snapshot shares the first's equal blocks, and restores as
			// exactly.
			other, err := m.newInstance(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer other.mod.Close(ctx) // made without a token of the pool
			var second *snapshot
			if err := m.withBaseMemory(ctx, c, func(base []byte) (err error) {
				second, err = takeSnapshot(other, c.snapshots, base, 1, snap)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			into, err := e.instantiate(ctx, c.runtime, c.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
			if err != nil {
				t.Fatal(err)
			}
			defer into.Close(ctx)
			if err := second.restore(into, c.snapshots); err != nil {
				t.Fatal(err)
			}
			wantOther, _ := other.mem.Read(0, other.mem.Size())
			if got, _ := into.Memory().Read(0, into.Memory().Size()); !bytes.Equal(got, wantOther) {
				t.Errorf("memory restored from a snapshot sharing another's blocks differs from its instance's")
			}
			if snap.size > 0 && second.size > snap.size/2 {
				t.Errorf("a second snapshot holds %d KiB of its own, the first %d KiB: it shares too little", second.size>>10, snap.size>>10)
			}
			t.Logf("%s: a second snapshot holds %d KiB of its own", guest, second.size>>10)
		})
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
		bin, plan, err := instrumentLoops(tc.module)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if tc.why == "" && plan.why != "" || !strings.Contains(plan.why, tc.why) {
			t.Errorf("%s: why = %q, want %q", tc.name, plan.why, tc.why)
		}
		if _, err := wazero.NewRuntime(context.Background()).CompileModule(context.Background(), bin); err != nil {
			t.Errorf("%s: the instrumented module is not valid: %v", tc.name, err)
		}
		if tc.name == "plain" {
			if want := []string{snapshotGlobalPrefix + "1"}; strings.Join(plan.globals, ",") != strings.Join(want, ",") {
				t.Errorf("exported globals %q, want %q (the mutable one only)", plan.globals, want)
			}
		}
	}
	name := []byte(snapshotGlobalPrefix + "mine")
	exports := section(7, append(append([]byte{0x01, byte(len(name))}, name...), 0x00, 0x00)...)
	if _, _, err := instrumentLoops(module(types, funcs, memory, exports, code(0x0b))); err == nil || !strings.Contains(err.Error(), string(name)) {
		t.Errorf("a module exporting %q: err = %v, want ErrReservedExport naming it", name, err)
	}
}

// Merging a module's data segments leaves a new instance's memory as it was, byte for byte.
func TestMergedDataIsTheSameMemory(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	if err := instantiateHostModule(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, guest := range []string{"hash-go", "benchc", "crud-go"} {
		wasmBytes := testguest(t, guest)
		bin, _, err := instrumentLoops(wasmBytes)
		if err != nil {
			t.Fatal(err)
		}
		segments := func(b []byte) (n uint64) {
			for rd := (reader{b: b, off: 8}); !rd.done(); {
				id, payload := rd.byte(), rd.bytes(int(rd.u32()))
				if id == 11 {
					n, _ = binary.Uvarint(payload)
				}
			}
			return n
		}
		memory := func(b []byte) []byte {
			cm, err := r.CompileModule(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			defer cm.Close(ctx)
			mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			mem, _ := mod.Memory().Read(0, mod.Memory().Size())
			return bytes.Clone(mem)
		}
		if !bytes.Equal(memory(wasmBytes), memory(bin)) {
			t.Errorf("%s: a new instance's memory differs once its data segments are merged", guest)
		}
		t.Logf("%s: %d data segments, %d merged", guest, segments(wasmBytes), segments(bin))
	}
}

// Segments that overlap, or lie at an offset that is not a constant, are left as they are; the
// others are joined across gaps of up to mergeGap bytes, in address order.
func TestMergeData(t *testing.T) {
	seg := func(off int64, data ...byte) []byte {
		b := appendSleb([]byte{0x00, 0x41}, off)
		b = binary.AppendUvarint(append(b, 0x0b), uint64(len(data)))
		return append(b, data...)
	}
	vec := func(segs ...[]byte) []byte { return append([]byte{byte(len(segs))}, bytes.Join(segs, nil)...) }
	if out, _ := mergeData(vec(seg(0, 1, 2), seg(1, 3))); out != nil {
		t.Error("overlapping segments were merged")
	}
	if out, _ := mergeData(vec([]byte{0x00, 0x23, 0x00, 0x0b, 0x01, 0xff})); out != nil {
		t.Error("a segment at a global's offset was merged")
	}
	// In address order: [4,6) and [8,9) are 2 apart, [9+mergeGap, ...) mergeGap after, and the
	// last one more than mergeGap further.
	out, n := mergeData(vec(seg(9+mergeGap, 9), seg(4, 1, 2), seg(8, 3), seg(11+2*mergeGap, 7)))
	if want := vec(seg(4, append(append([]byte{1, 2, 0, 0, 3}, make([]byte, mergeGap)...), 9)...), seg(11+2*mergeGap, 7)); n != 2 || !bytes.Equal(out, want) {
		t.Errorf("merged into %d segments:\n%x\nwant\n%x", n, out, want)
	}
}
