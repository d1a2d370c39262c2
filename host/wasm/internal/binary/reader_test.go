package binary

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// The tests of this package build their modules by hand, from these: no toolchain, no built
// module.

// wasmHeader is a module's magic and version.
var wasmHeader = []byte("\x00asm\x01\x00\x00\x00")

// sec encodes a section: its id, its size, its payload.
func sec(id byte, payload ...byte) []byte {
	return append(binary.AppendUvarint([]byte{id}, uint64(len(payload))), payload...)
}

// module joins the header and sections.
func module(sections ...[]byte) []byte {
	return bytes.Join(append([][]byte{wasmHeader}, sections...), nil)
}

// vector encodes a vector: its length, then its entries.
func vector(entries ...[]byte) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(entries))), bytes.Join(entries, nil)...)
}

// name encodes a name: its length, then its bytes.
func name(s string) []byte { return append(binary.AppendUvarint(nil, uint64(len(s))), s...) }

// cat joins byte slices.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// Unsigned LEB128 numbers of up to 5 bytes and 32 bits are read; longer or larger ones, and
// those cut short, are errors.
func TestReaderU32(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want uint32
		ok   bool
	}{
		{[]byte{0x00}, 0, true},
		{[]byte{0x7f}, 127, true},
		{[]byte{0x80, 0x01}, 128, true},
		{[]byte{0xe5, 0x8e, 0x26}, 624485, true},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x00}, 0, true}, // padded to 5 bytes
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, math.MaxUint32, true},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x1f}, 0, false},       // 2^33-1
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 0, false}, // 6 bytes
		{[]byte{0x80, 0x80}, 0, false},                         // cut short
		{nil, 0, false},
	} {
		r := reader{b: tc.in}
		got := r.u32()
		if ok := r.err == nil; ok != tc.ok || got != tc.want {
			t.Errorf("u32(%x) = %d, err %v; want %d, ok %t", tc.in, got, r.err, tc.want, tc.ok)
		}
		if !tc.ok && !r.done() {
			t.Errorf("u32(%x) failed, yet the reader is not done: the next read would go on", tc.in)
		}
	}
}

// Signed LEB128 numbers of up to 32 bits are read with their sign; sleb and appendSleb write
// what s32 reads back.
func TestReaderS32(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want int32
	}{
		{[]byte{0x00}, 0},
		{[]byte{0x3f}, 63},
		{[]byte{0xc0, 0x00}, 64},
		{[]byte{0x7f}, -1},
		{[]byte{0x40}, -64},
		{[]byte{0xbf, 0x7f}, -65},
		{[]byte{0x80, 0x20}, 4096},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x07}, math.MaxInt32},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x78}, math.MinInt32},
	} {
		r := reader{b: tc.in}
		if got := r.s32(); got != tc.want || r.err != nil || !r.done() {
			t.Errorf("s32(%x) = %d, err %v, %d bytes read; want %d", tc.in, got, r.err, r.off, tc.want)
		}
		if got := appendSleb(nil, int64(tc.want)); !bytes.Equal(got, tc.in) {
			t.Errorf("appendSleb(%d) = %x, want %x", tc.want, got, tc.in)
		}
		if tc.want >= 0 {
			if got := sleb(tc.want); !bytes.Equal(got, tc.in) {
				t.Errorf("sleb(%d) = %x, want %x", tc.want, got, tc.in)
			}
		}
	}
	for _, in := range [][]byte{{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, {0x80}} {
		r := reader{b: in}
		if r.s32(); r.err == nil {
			t.Errorf("s32(%x) read a number", in)
		}
	}
}

// leb skips a LEB128 number of up to 10 bytes, signed or not; bytes, a count of bytes there
// are; limits, the three forms of a table's or memory's limits. The first error sticks, and
// every read after it returns nothing.
func TestReaderSkips(t *testing.T) {
	r := reader{b: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x2a}}
	if r.leb(); r.err != nil || r.byte() != 0x2a || !r.done() {
		t.Errorf("leb did not skip a 10-byte number: err %v, at %d", r.err, r.off)
	}
	r = reader{b: bytes.Repeat([]byte{0x80}, 11)}
	if r.leb(); r.err == nil {
		t.Error("leb skipped an 11-byte number")
	}

	for _, tc := range []struct {
		in []byte
		ok bool
	}{
		{[]byte{0x00, 0x01}, true},
		{[]byte{0x01, 0x01, 0x02}, true},
		{[]byte{0x03, 0x01, 0x02}, true}, // shared
		{[]byte{0x02, 0x01}, false},
		{[]byte{0x01, 0x01}, false},
	} {
		r := reader{b: tc.in}
		if r.limits(); (r.err == nil) != tc.ok || tc.ok && !r.done() {
			t.Errorf("limits(%x): err %v, at %d; want ok %t", tc.in, r.err, r.off, tc.ok)
		}
	}

	r = reader{b: []byte{1, 2, 3}}
	if got := r.bytes(2); !bytes.Equal(got, []byte{1, 2}) {
		t.Errorf("bytes(2) = %x", got)
	}
	if got := r.bytes(2); got != nil || r.err == nil {
		t.Errorf("bytes(2) with 1 left = %x, err %v", got, r.err)
	}
	first := r.err
	if r.byte() != 0 || r.u32() != 0 || len(r.bytes(1)) != 0 || r.err != first {
		t.Errorf("reads after an error returned something, or changed the error to %v", r.err)
	}
	r = reader{b: []byte{1}}
	if r.bytes(-1); r.err == nil {
		t.Error("bytes(-1) did not fail")
	}
}

// A module splits into its sections, in order; a section that runs past the end is an error.
func TestReadSections(t *testing.T) {
	long := bytes.Repeat([]byte{0xaa}, 200) // a size of two bytes
	got, err := readSections(module(sec(1, 0x00), sec(0, name("x")...), sec(11, long...)))
	if err != nil {
		t.Fatal(err)
	}
	want := []section{{1, []byte{0x00}}, {0, name("x")}, {11, long}}
	if len(got) != len(want) {
		t.Fatalf("%d sections, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].id != want[i].id || !bytes.Equal(got[i].payload, want[i].payload) {
			t.Errorf("section %d = %d %x, want %d %x", i, got[i].id, got[i].payload, want[i].id, want[i].payload)
		}
	}
	if got, err := readSections(wasmHeader); err != nil || len(got) != 0 {
		t.Errorf("a module of no section: %v, %v", got, err)
	}
	cut := module(sec(1, 0x00, 0x01, 0x02))
	if _, err := readSections(cut[:len(cut)-1]); !errors.Is(err, ErrNotInstrumentable) {
		t.Errorf("a section cut short: err = %v, want ErrNotInstrumentable", err)
	}
}

// appendToVector counts the entries it adds, the count growing a byte where it must; customName
// reads a custom section's name.
func TestAppendToVector(t *testing.T) {
	entries := bytes.Repeat([]byte{0x01}, 127)
	payload := append([]byte{127}, entries...)
	got := appendToVector(payload, 2, []byte{0x02, 0x03})
	if want := cat([]byte{0x81, 0x01}, entries, []byte{0x02, 0x03}); !bytes.Equal(got, want) {
		t.Errorf("appendToVector = %x, want %x", got, want)
	}
	if got := appendToVector([]byte{0x00}, 1, []byte{0x07}); !bytes.Equal(got, []byte{0x01, 0x07}) {
		t.Errorf("appendToVector to an empty vector = %x", got)
	}
	if n, ok := customName(append(name(".debug_info"), 0xff)); n != ".debug_info" || !ok {
		t.Errorf("customName = %q, %t", n, ok)
	}
	if _, ok := customName([]byte{0x05, 'a'}); ok {
		t.Error("customName read a name cut short")
	}
}

// skipConstExpr reads past the constant expressions of WebAssembly 2.0 with extended constants,
// and refuses any other instruction.
func TestSkipConstExpr(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"i32.const", []byte{0x41, 0x90, 0xce, 0x00, 0x0b}, true},
		{"i64.const", []byte{0x42, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x0b}, true},
		{"f32.const", []byte{0x43, 0, 0, 0x80, 0x3f, 0x0b}, true},
		{"f64.const", []byte{0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x0b}, true},
		{"global.get", []byte{0x23, 0x01, 0x0b}, true},
		{"ref.null", []byte{0xd0, 0x70, 0x0b}, true},
		{"ref.func", []byte{0xd2, 0x03, 0x0b}, true},
		{"v128.const", append(append([]byte{0xfd, 0x0c}, make([]byte, 16)...), 0x0b), true},
		{"extended", []byte{0x41, 0x01, 0x41, 0x02, 0x6a, 0x41, 0x03, 0x6c, 0x0b}, true},
		{"another SIMD op", []byte{0xfd, 0x0d, 0x0b}, false},
		{"local.get", []byte{0x20, 0x00, 0x0b}, false},
		{"no end", []byte{0x41, 0x00}, false},
	} {
		r := reader{b: append(tc.in, 0x2a)}
		if ok := skipConstExpr(&r); ok != tc.ok {
			t.Errorf("%s: skipConstExpr = %t, want %t", tc.name, ok, tc.ok)
		}
		if tc.ok && r.byte() != 0x2a {
			t.Errorf("%s: skipConstExpr stopped at byte %d, not past the end", tc.name, r.off-1)
		}
	}
}
