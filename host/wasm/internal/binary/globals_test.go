package binary

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// mutableGlobals finds the mutable globals of the four number types, by their index among the
// defined globals, and says why when a snapshot could not hold them all.
func TestMutableGlobals(t *testing.T) {
	globals := vector(
		[]byte{0x7f, 0x00, 0x41, 0x05, 0x0b},                   // 0: immutable i32
		[]byte{0x7f, 0x01, 0x41, 0x01, 0x41, 0x02, 0x6a, 0x0b}, // 1: mutable i32, an extended constant
		[]byte{0x7e, 0x01, 0x42, 0x07, 0x0b},                   // 2: mutable i64
		[]byte{0x7d, 0x01, 0x43, 0, 0, 0, 0, 0x0b},             // 3: mutable f32
		[]byte{0x7c, 0x01, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b}, // 4: mutable f64
		[]byte{0x70, 0x00, 0xd0, 0x70, 0x0b},                   // 5: immutable funcref
		[]byte{0x7f, 0x01, 0x23, 0x00, 0x0b},                   // 6: mutable i32 from global 0
	)
	mutable, why := mutableGlobals(globals)
	if want := []uint32{1, 2, 3, 4, 6}; why != "" || !slices.Equal(mutable, want) {
		t.Errorf("mutableGlobals = %v, %q; want %v", mutable, why, want)
	}
	if mutable, why := mutableGlobals(vector()); why != "" || len(mutable) != 0 {
		t.Errorf("no global: %v, %q", mutable, why)
	}

	for _, tc := range []struct {
		name    string
		payload []byte
		why     string
	}{
		{"mutable v128", vector(append(append([]byte{0x7b, 0x01, 0xfd, 0x0c}, make([]byte, 16)...), 0x0b)), "vector or reference"},
		{"mutable funcref", vector([]byte{0x70, 0x01, 0xd0, 0x70, 0x0b}), "vector or reference"},
		{"mutable externref", vector([]byte{0x6f, 0x01, 0xd0, 0x6f, 0x0b}), "vector or reference"},
		{"an initialiser it does not read", vector([]byte{0x7f, 0x01, 0x20, 0x00, 0x0b}), "initialiser the host does not read"},
		{"an entry cut short", []byte{0x02, 0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f}, "initialiser the host does not read"},
		{"a count cut short", []byte{0x80}, "malformed"},
	} {
		if mutable, why := mutableGlobals(tc.payload); mutable != nil || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %v, %q; want nothing and why %q", tc.name, mutable, why, tc.why)
		}
	}
}

// Each mutable global is exported as GlobalExportPrefix and its index in the module's global
// index space, which counts the imported globals first.
func TestAppendGlobalExports(t *testing.T) {
	export := []byte{0xaa} // what is there already stays first
	got, names := appendGlobalExports(export, []uint32{0, 130}, 2)
	want := cat([]byte{0xaa},
		name("wasmrec:global:2"), []byte{0x03, 0x02},
		name("wasmrec:global:132"), []byte{0x03, 0x84, 0x01})
	if !bytes.Equal(got, want) {
		t.Errorf("exports\n%x\nwant\n%x", got, want)
	}
	if want := []string{"wasmrec:global:2", "wasmrec:global:132"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if got, names := appendGlobalExports(nil, nil, 3); got != nil || names != nil {
		t.Errorf("no mutable global: %x, %q", got, names)
	}
}

// The host reserves the name of the flag it exports and every name of its globals' prefix.
func TestReservedExport(t *testing.T) {
	for name, reserved := range map[string]bool{
		InterruptExport:                  true,
		GlobalExportPrefix:               true,
		GlobalExportPrefix + "7":         true,
		"wasmrec:other":                  false,
		"wasmrec_interrupt_":             false,
		"memory":                         false,
		"wasmrec_abi_v1":                 false,
		strings.ToUpper(InterruptExport): false,
	} {
		if got := reservedExport(name); got != reserved {
			t.Errorf("reservedExport(%q) = %t, want %t", name, got, reserved)
		}
	}
}
