//go:build unix

package linearmem

import (
	"math"
	"os"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// Allocator backs linear memories with anonymous mappings. A memory must not be read, by the
// guest or the host, once its instance is closed: closing unmaps it. The host only closes
// instances that no call is running on, and reads none it has closed.
var Allocator experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(allocate)

var pageSize = uint64(os.Getpagesize())

func allocate(_, max uint64) experimental.LinearMemory { return &memory{max: max} }

// memory is one linear memory: a reservation of max bytes (rounded up to whole pages), of
// which the first usable bytes may be read and written, the rest PROT_NONE. Reserved but not
// usable, the rest counts against no overcommit limit.
//
// Where the OS refuses the reservation (a limit on the process's address space, or on its
// number of mappings), the memory is a Go slice instead, as wazero's own memories are: the
// instance runs all the same.
type memory struct {
	max      uint64
	reserved []byte // the whole mapping, as unix.Mmap returned it; nil until the first use
	usable   uint64 // bytes of reserved made readable and writable, whole pages
	heap     []byte // the memory, when the reservation was refused
	onHeap   bool
}

// mmap is unix.Mmap; tests replace it to refuse reservations.
var mmap = unix.Mmap

// Reallocate makes the memory size bytes long, and returns it; nil if it cannot (past the
// maximum, or the OS refuses the pages), which the guest sees as a memory.grow that failed.
func (m *memory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if m.reserved == nil && !m.onHeap {
		if m.max == 0 {
			return []byte{}
		}
		var (
			b   []byte
			err error = unix.ENOMEM
		)
		if roundUp(m.max) <= math.MaxInt {
			b, err = mmap(-1, 0, int(roundUp(m.max)), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
		}
		m.reserved, m.onHeap = b, err != nil
	}
	if m.onHeap {
		if grow := int(size) - len(m.heap); grow > 0 {
			m.heap = append(m.heap, make([]byte, grow)...)
		}
		return m.heap[:size:size]
	}
	if need := roundUp(size); need > m.usable {
		if err := unix.Mprotect(m.reserved[m.usable:need], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil
		}
		m.usable = need
	}
	return m.reserved[:size:size]
}

// Free unmaps the memory.
func (m *memory) Free() {
	if m.reserved != nil {
		_ = unix.Munmap(m.reserved)
		m.reserved, m.usable = nil, 0
	}
	m.heap = nil
}

func roundUp(n uint64) uint64 { return (n + pageSize - 1) &^ (pageSize - 1) }
