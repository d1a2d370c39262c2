package binary

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// check is the sequence its comment shows, with the flag's and the counter's indexes as given
// (LEB128, so that a module of many globals gets a longer one).
func TestCheck(t *testing.T) {
	want := []byte{
		0x23, 0x01, 0x41, 0x01, 0x6b, 0x24, 0x01, // global.get $count; i32.const 1; i32.sub; global.set $count
		0x23, 0x01, 0x45, // global.get $count; i32.eqz
		0x04, 0x40, // if
		0x41, 0x00, 0x40, 0x00, 0x1a, // i32.const 0; memory.grow 0; drop
		0x23, 0x00, 0x04, 0x40, 0x00, 0x0b, // global.get $flag; if; unreachable; end
		0x41, 0x80, 0x20, 0x24, 0x01, // i32.const 4096; global.set $count
		0x0b, // end
	}
	if got := check(0, 1); !bytes.Equal(got, want) {
		t.Errorf("check(0, 1) =\n%x\nwant\n%x", got, want)
	}
	got := check(200, 201)
	if !bytes.HasPrefix(got, []byte{0x23, 0xc9, 0x01}) || !bytes.Contains(got, []byte{0x23, 0xc8, 0x01, 0x04, 0x40}) {
		t.Errorf("check(200, 201) does not read its globals at two-byte indexes: %x", got)
	}
}

// instrumentBody puts chk right after every loop's block type, whatever its form, and copies
// everything else as it is.
func TestInstrumentBodyLoops(t *testing.T) {
	chk := []byte{0xee, 0xee} // not an instruction: the pass never reads what it inserts
	for _, tc := range []struct {
		name     string
		in, want []byte
	}{
		{"no loop",
			[]byte{0x00, 0x41, 0x01, 0x1a, 0x0b},
			[]byte{0x00, 0x41, 0x01, 0x1a, 0x0b}},
		{"locals, then a loop",
			[]byte{0x02, 0x02, 0x7f, 0x01, 0x7e, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b},
			[]byte{0x02, 0x02, 0x7f, 0x01, 0x7e, 0x03, 0x40, 0xee, 0xee, 0x0c, 0x00, 0x0b, 0x0b}},
		{"a loop of a value type",
			[]byte{0x00, 0x03, 0x7f, 0x41, 0x00, 0x0b, 0x1a, 0x0b},
			[]byte{0x00, 0x03, 0x7f, 0xee, 0xee, 0x41, 0x00, 0x0b, 0x1a, 0x0b}},
		{"a loop of a type index of two bytes",
			[]byte{0x00, 0x03, 0x80, 0x01, 0x0b, 0x0b},
			[]byte{0x00, 0x03, 0x80, 0x01, 0xee, 0xee, 0x0b, 0x0b}},
		{"nested loops in a block",
			[]byte{0x00, 0x02, 0x40, 0x03, 0x40, 0x03, 0x40, 0x0b, 0x0b, 0x0b, 0x0b},
			[]byte{0x00, 0x02, 0x40, 0x03, 0x40, 0xee, 0xee, 0x03, 0x40, 0xee, 0xee, 0x0b, 0x0b, 0x0b, 0x0b}},
		{"a loop's opcode as another's immediate is no loop",
			[]byte{0x00, 0x41, 0x03, 0x1a, 0x44, 0x03, 0x40, 0x03, 0x40, 0x03, 0x40, 0x03, 0x40, 0x1a, 0x0b},
			[]byte{0x00, 0x41, 0x03, 0x1a, 0x44, 0x03, 0x40, 0x03, 0x40, 0x03, 0x40, 0x03, 0x40, 0x1a, 0x0b}},
	} {
		var tables bool
		got, err := instrumentBody(nil, tc.in, chk, &tables)
		if err != nil || !bytes.Equal(got, tc.want) || tables {
			t.Errorf("%s: %x, %v, tables %t; want %x", tc.name, got, err, tables, tc.want)
		}
	}
	// It appends to out, which it is handed to reuse.
	var tables bool
	got, _ := instrumentBody([]byte{0x99}, []byte{0x00, 0x0b}, chk, &tables)
	if !bytes.Equal(got, []byte{0x99, 0x00, 0x0b}) {
		t.Errorf("instrumentBody did not append to out: %x", got)
	}
}

// Every immediate of WebAssembly 2.0 with SIMD is skipped as long as it is: a body of one of each
// comes out as it went in.
func TestInstrumentBodyImmediates(t *testing.T) {
	v128 := make([]byte, 16)
	body := cat(
		[]byte{0x00},                               // no locals
		[]byte{0x02, 0x40},                         // block
		[]byte{0x04, 0x7f},                         // if (result i32)
		[]byte{0x05, 0x0b, 0x0b},                   // else, end, end
		[]byte{0x0e, 0x02, 0x00, 0x81, 0x01, 0x02}, // br_table 0 129 2
		[]byte{0x10, 0x85, 0x02},                   // call 261
		[]byte{0x11, 0x01, 0x00},                   // call_indirect
		[]byte{0x1c, 0x02, 0x7f, 0x7e},             // select (i32 i64)
		[]byte{0x20, 0x00, 0x21, 0x01, 0x22, 0x02, 0x23, 0x03, 0x24, 0x04, 0x25, 0x00},       // local and global get/set/tee, table.get
		[]byte{0x28, 0x02, 0x80, 0x80, 0x04, 0x3e, 0x00, 0x00},                               // i32.load, i64.store32
		[]byte{0x3f, 0x00, 0x40, 0x00},                                                       // memory.size, memory.grow
		[]byte{0x41, 0x7f, 0x42, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}, // i32.const -1, i64.const max
		[]byte{0x43, 0x03, 0x03, 0x03, 0x03},                                                 // f32.const whose bytes are loop opcodes
		[]byte{0x44, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03},                         // f64.const, the same
		[]byte{0x45, 0x6a, 0xc4, 0x1a, 0x1b, 0x00, 0x01, 0x0f},                               // no immediates
		[]byte{0xd0, 0x70, 0xd1, 0xd2, 0x00},                                                 // ref.null, ref.is_null, ref.func
		[]byte{0xfc, 0x00, 0xfc, 0x07},                                                       // saturating truncations
		[]byte{0xfc, 0x08, 0x01, 0x00, 0xfc, 0x09, 0x01},                                     // memory.init, data.drop
		[]byte{0xfc, 0x0a, 0x00, 0x00, 0xfc, 0x0b, 0x00},                                     // memory.copy, memory.fill
		[]byte{0xfc, 0x10, 0x00},                                                             // table.size: reads only
		[]byte{0xfd, 0x00, 0x04, 0x10, 0xfd, 0x0b, 0x04, 0x00},                               // v128.load, v128.store
		[]byte{0xfd, 0x5c, 0x02, 0x00, 0xfd, 0x5d, 0x03, 0x00},                               // v128.load32_zero, load64_zero
		append([]byte{0xfd, 0x0c}, v128...),                                                  // v128.const
		append([]byte{0xfd, 0x0d}, v128...),                                                  // i8x16.shuffle
		[]byte{0xfd, 0x15, 0x0f, 0xfd, 0x22, 0x01},                                           // extract and replace lane
		[]byte{0xfd, 0x54, 0x00, 0x00, 0x03, 0xfd, 0x5b, 0x03, 0x00, 0x01},                   // load and store lane
		[]byte{0xfd, 0x0e, 0xfd, 0xff, 0x01},                                                 // i8x16.swizzle; 255, the highest it takes
		[]byte{0x0b},
	)
	var tables bool
	got, err := instrumentBody(nil, body, []byte{0xee}, &tables)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("%v:\n%x\nwant\n%x", err, got, body)
	}
	if tables {
		t.Error("a body that changes no table was said to")
	}
}

// A body that changes a table is said to, whichever instruction does it; one that only reads
// tables is not.
func TestInstrumentBodyTables(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		changes bool
	}{
		{"table.set", []byte{0x26, 0x00}, true},
		{"table.init", []byte{0xfc, 0x0c, 0x00, 0x00}, true},
		{"elem.drop", []byte{0xfc, 0x0d, 0x00}, true},
		{"table.copy", []byte{0xfc, 0x0e, 0x00, 0x00}, true},
		{"table.grow", []byte{0xfc, 0x0f, 0x00}, true},
		{"table.fill", []byte{0xfc, 0x11, 0x00}, true},
		{"table.get", []byte{0x25, 0x00}, false},
		{"table.size", []byte{0xfc, 0x10, 0x00}, false},
		{"call_indirect", []byte{0x11, 0x00, 0x00}, false},
	} {
		var tables bool
		body := cat([]byte{0x00}, tc.in, []byte{0x0b})
		if _, err := instrumentBody(nil, body, nil, &tables); err != nil || tables != tc.changes {
			t.Errorf("%s: tables %t, err %v; want %t", tc.name, tables, err, tc.changes)
		}
	}
}

// An instruction beyond WebAssembly 2.0 with SIMD, and a body cut short, are errors, whatever
// comes of them (a panic indexing past the end included).
func TestInstrumentBodyRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"return_call", []byte{0x00, 0x12, 0x00, 0x0b}, "opcode 0x12"},
		{"try_table", []byte{0x00, 0x1f, 0x40, 0x00, 0x0b}, "opcode 0x1f"},
		{"i32.atomic.load", []byte{0x00, 0xfe, 0x10, 0x02, 0x00, 0x0b}, "opcode 0xfe"},
		{"0xfc 18", []byte{0x00, 0xfc, 0x12, 0x0b}, "opcode 0xfc 18"},
		{"0xfd 256", []byte{0x00, 0xfd, 0x80, 0x02, 0x0b}, "opcode 0xfd 256"},
		{"an i32.const cut short", []byte{0x00, 0x41}, "truncated"},
		{"locals cut short", []byte{0x02, 0x01, 0x7f}, "truncated"},
		{"a f64.const cut short", []byte{0x00, 0x44, 0x00, 0x00}, "runs past the function's end"},
		{"a select's types cut short", []byte{0x00, 0x1c, 0x05, 0x7f}, "runs past the function's end"},
	} {
		var tables bool
		if _, err := instrumentBody(nil, tc.in, nil, &tables); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// instrumentCode instruments each function of a code section and writes the section again, each
// body with its new size; with a large section, its runs side by side join in order.
func TestInstrumentCode(t *testing.T) {
	chk := check(0, 1)
	fn := func(body ...byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(body))), body...) }
	loop := []byte{0x00, 0x03, 0x40, 0x0b, 0x0b}
	plain := []byte{0x00, 0x0b}
	got, tables, err := instrumentCode(vector(fn(loop...), fn(plain...)), 0, 1)
	instrumented := cat([]byte{0x00, 0x03, 0x40}, chk, []byte{0x0b, 0x0b})
	if want := vector(fn(instrumented...), fn(plain...)); err != nil || tables || !bytes.Equal(got, want) {
		t.Errorf("%x, tables %t, %v; want %x", got, tables, err, want)
	}
	if _, tables, _ := instrumentCode(vector(fn(plain...), fn(0x00, 0x26, 0x00, 0x0b)), 0, 1); !tables {
		t.Error("a section with a table.set in its second function was not said to change tables")
	}

	for name, payload := range map[string][]byte{
		"bytes after the last function": append(vector(fn(plain...)), 0x00),
		"a function cut short":          vector(fn(plain...))[:2],
		"fewer functions than counted":  append([]byte{0x02}, fn(plain...)...),
		"an instruction it cannot read": vector(fn(plain...), fn(0x00, 0x12, 0x00, 0x0b)),
	} {
		if _, _, err := instrumentCode(payload, 0, 1); !errors.Is(err, ErrNotInstrumentable) {
			t.Errorf("%s: err = %v, want ErrNotInstrumentable", name, err)
		}
	}
	if _, _, err := instrumentCode(vector(fn(plain...), fn(0x00, 0x12, 0x00, 0x0b)), 0, 1); err == nil || !strings.Contains(err.Error(), "function 1:") {
		t.Errorf("the error does not name the function: %v", err)
	}

	// Past 1 MiB the functions are split among workers (at most one a CPU, one a MiB): the
	// result is the same as one at a time, and a function that fails is named by its index in
	// the whole section.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var fns, want [][]byte
	for i, size := 0, 0; size < 3<<20; i++ {
		body := cat([]byte{0x01, 0x01, 0x7f}, bytes.Repeat([]byte{0x41, byte(i & 0x3f), 0x1a}, 100), loop[1:])
		fns = append(fns, fn(body...))
		size += len(fns[i])
		var tables bool
		b, err := instrumentBody(nil, body, chk, &tables)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fn(b...))
	}
	got, tables, err = instrumentCode(vector(fns...), 0, 1)
	if err != nil || tables || !bytes.Equal(got, vector(want...)) {
		t.Errorf("a section of %d functions instrumented in parallel differs from one at a time (err %v)", len(fns), err)
	}
	bad := len(fns) * 2 / 3 // in a later worker's run
	fns[bad] = fn(0x00, 0x12, 0x00, 0x0b)
	if _, _, err := instrumentCode(vector(fns...), 0, 1); err == nil || !strings.Contains(err.Error(), "function "+strconv.Itoa(bad)+":") {
		t.Errorf("function %d cannot be read: err = %v", bad, err)
	}
}
