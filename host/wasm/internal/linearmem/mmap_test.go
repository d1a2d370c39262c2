//go:build unix

package linearmem

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A memory grows in place, keeping what was written, up to its maximum and not past it, and
// its mapping is gone once it is freed.
func TestMemoryGrowsInPlaceAndIsUnmapped(t *testing.T) {
	const page = 64 << 10 // a wasm page
	m := Allocator.Allocate(page, 4*page)
	b := m.Reallocate(page)
	if len(b) != page {
		t.Fatalf("%d bytes, want %d", len(b), page)
	}
	b[0], b[page-1] = 1, 2
	base := unsafe.SliceData(b)

	grown := m.Reallocate(3 * page)
	if len(grown) != 3*page || unsafe.SliceData(grown) != base {
		t.Fatalf("grown to %d bytes at %p, want %d at %p", len(grown), unsafe.SliceData(grown), 3*page, base)
	}
	if grown[0] != 1 || grown[page-1] != 2 || grown[3*page-1] != 0 {
		t.Fatal("growing lost what was written, or the new bytes are not zero")
	}
	grown[3*page-1] = 3
	if m.Reallocate(4*page+1) != nil {
		t.Fatal("grown past its maximum")
	}
	if full := m.Reallocate(4 * page); len(full) != 4*page || full[3*page-1] != 3 {
		t.Fatal("not grown to its maximum")
	}
	if !mapped(t, uintptr(unsafe.Pointer(base))) {
		t.Fatal("the memory is not in the process's mappings")
	}
	m.Free()
	if mapped(t, uintptr(unsafe.Pointer(base))) {
		t.Fatal("the memory is still mapped once freed")
	}
	m.Free() // a second Free is harmless
}

// Where the OS refuses the reservation, the memory is a Go slice, and grows all the same.
func TestRefusedReservationFallsBackToTheHeap(t *testing.T) {
	defer func(f func(int, int64, int, int, int) ([]byte, error)) { mmap = f }(mmap)
	mmap = func(int, int64, int, int, int) ([]byte, error) { return nil, unix.ENOMEM }
	const page = 64 << 10
	m := Allocator.Allocate(page, 2*page)
	b := m.Reallocate(page)
	if len(b) != page {
		t.Fatalf("%d bytes, want %d", len(b), page)
	}
	b[page-1] = 7
	grown := m.Reallocate(2 * page)
	if len(grown) != 2*page || grown[page-1] != 7 || grown[2*page-1] != 0 {
		t.Fatal("growing a memory on the heap lost what was written, or the new bytes are not zero")
	}
	if m.Reallocate(2*page+1) != nil {
		t.Fatal("grown past its maximum")
	}
	m.Free()
}

// A memory whose maximum is 0 is empty, and maps nothing.
func TestEmptyMemory(t *testing.T) {
	m := Allocator.Allocate(0, 0)
	if b := m.Reallocate(0); b == nil || len(b) != 0 {
		t.Fatalf("%v, want an empty slice", b)
	}
	if m.Reallocate(1) != nil {
		t.Fatal("grown past a maximum of 0")
	}
	m.Free()
}

// mapped says whether addr is in one of the process's mappings.
func mapped(t *testing.T, addr uintptr) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	for _, l := range strings.Split(string(b), "\n") {
		lo, rest, ok := strings.Cut(l, "-")
		if !ok {
			continue
		}
		hi, _, _ := strings.Cut(rest, " ")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && uint64(addr) >= start && uint64(addr) < end {
			return true
		}
	}
	return false
}
