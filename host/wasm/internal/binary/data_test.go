package binary

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Merging a module's data segments leaves a new instance's memory as it was, byte for byte.
func TestMergedDataIsTheSameMemory(t *testing.T) {
	ctx := context.Background()
	for _, guest := range []string{"hash-go", "benchc", "crud-go"} {
		wasmBytes := testguest(t, guest)
		bin, _, err := InstrumentLoops(wasmBytes)
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
		r := linked(t, wasmBytes)
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

// linked returns a runtime in which wasm can be instantiated: WASI, and for its other imports
// functions that do nothing. Its instances run no function, so what the host's would do does
// not matter, only that they are there.
func linked(t *testing.T, wasm []byte) wazero.Runtime {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter()) // compiles cheaply
	t.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close(ctx)
	stubs := map[string]wazero.HostModuleBuilder{}
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		if mod == wasi_snapshot_preview1.ModuleName {
			continue
		}
		if stubs[mod] == nil {
			stubs[mod] = r.NewHostModuleBuilder(mod)
		}
		stubs[mod].NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}), def.ParamTypes(), def.ResultTypes()).Export(name)
	}
	for mod, b := range stubs {
		if _, err := b.Instantiate(ctx); err != nil {
			t.Fatalf("linking %s: %v", mod, err)
		}
	}
	return r
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

// Only active segments on memory 0 at an i32.const offset are merged, and a data section that
// does not read to its end is left as it is. A segment naming memory 0 is written again in the
// short form; an offset past 2 GiB (a negative i32) keeps its place.
func TestMergeDataForms(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"passive", vector([]byte{0x01, 0x01, 0xaa})},
		{"on memory 1", vector([]byte{0x02, 0x01, 0x41, 0x00, 0x0b, 0x01, 0xaa})},
		{"at an i64.const", vector([]byte{0x00, 0x42, 0x00, 0x0b, 0x01, 0xaa})},
		{"an offset of two instructions", vector([]byte{0x00, 0x41, 0x00, 0x41, 0x00, 0x6a, 0x0b, 0x01, 0xaa})},
		{"bytes after the last segment", append(vector([]byte{0x00, 0x41, 0x00, 0x0b, 0x01, 0xaa}), 0x00)},
		{"a segment cut short", vector([]byte{0x00, 0x41, 0x00, 0x0b, 0x02, 0xaa})},
	} {
		if out, n := mergeData(tc.payload); out != nil || n != 0 {
			t.Errorf("%s: merged into %d segments: %x", tc.name, n, out)
		}
	}

	explicit := []byte{0x02, 0x00, 0x41, 0x10, 0x0b, 0x01, 0xaa} // memory 0 named
	high := []byte{0x00, 0x41, 0x80, 0x80, 0x80, 0x80, 0x78, 0x0b, 0x01, 0xbb}
	out, n := mergeData(vector(high, explicit))
	want := vector([]byte{0x00, 0x41, 0x10, 0x0b, 0x01, 0xaa}, high)
	if n != 2 || !bytes.Equal(out, want) {
		t.Errorf("merged into %d segments:\n%x\nwant\n%x", n, out, want)
	}
	if out, n := mergeData(vector()); n != 0 || !bytes.Equal(out, []byte{0x00}) {
		t.Errorf("an empty data section: %x, %d segments", out, n)
	}
}

// Segments that touch are joined with no gap, the first written first; an empty segment is
// joined as well.
func TestMergeDataAdjacent(t *testing.T) {
	seg := func(off byte, data ...byte) []byte {
		return append([]byte{0x00, 0x41, off, 0x0b, byte(len(data))}, data...)
	}
	out, n := mergeData(vector(seg(2, 3), seg(0, 1, 2), seg(3), seg(3, 4)))
	if want := vector(seg(0, 1, 2, 3, 4)); n != 1 || !bytes.Equal(out, want) {
		t.Errorf("merged into %d segments: %x, want %x", n, out, want)
	}
}

// passiveData says a section has passive segments when it has one, or when it cannot be read
// (a snapshot of such a module would not hold what it should).
func TestPassiveData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload []byte
		passive bool
	}{
		{"active", vector([]byte{0x00, 0x41, 0x00, 0x0b, 0x01, 0xaa}), false},
		{"active on a named memory", vector([]byte{0x02, 0x00, 0x41, 0x00, 0x0b, 0x01, 0xaa}), false},
		{"active at a global's offset", vector([]byte{0x00, 0x23, 0x00, 0x0b, 0x00}), false},
		{"none", vector(), false},
		{"passive, after an active one", vector([]byte{0x00, 0x41, 0x00, 0x0b, 0x00}, []byte{0x01, 0x01, 0xaa}), true},
		{"an unknown form", vector([]byte{0x03, 0x00}), true},
		{"an offset it cannot read", vector([]byte{0x00, 0x20, 0x00, 0x0b, 0x00}), true},
		{"cut short", vector([]byte{0x00, 0x41, 0x00, 0x0b, 0x05, 0xaa}), true},
	} {
		if got := passiveData(tc.payload); got != tc.passive {
			t.Errorf("%s: passiveData = %t, want %t", tc.name, got, tc.passive)
		}
	}
}
