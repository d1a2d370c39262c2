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
type memory struct {
	max      uint64
	reserved []byte // the whole mapping, as unix.Mmap returned it; nil until the first use
	usable   uint64 // bytes of reserved made readable and writable, whole pages
}

// Reallocate makes the memory size bytes long, and returns it; nil if it cannot (past the
// maximum, or the OS refuses the pages), which the guest sees as a memory.grow that failed.
func (m *memory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if m.reserved == nil {
		if m.max == 0 {
			return []byte{}
		}
		if roundUp(m.max) > math.MaxInt {
			return nil
		}
		b, err := unix.Mmap(-1, 0, int(roundUp(m.max)), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
		if err != nil {
			return nil
		}
		m.reserved = b
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
}

func roundUp(n uint64) uint64 { return (n + pageSize - 1) &^ (pageSize - 1) }
