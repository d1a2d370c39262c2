//go:build !unix

package linearmem

import "github.com/tetratelabs/wazero/experimental"

// Allocator backs linear memories with Go slices, as wazero does by default: without mmap, a
// memory is copied as it grows and goes back to the OS when the Go runtime collects it.
var Allocator experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(allocate)

func allocate(capacity, max uint64) experimental.LinearMemory {
	return &memory{max: max, buf: make([]byte, 0, min(capacity, max))}
}

type memory struct {
	max uint64
	buf []byte
}

func (m *memory) Reallocate(size uint64) []byte {
	switch {
	case size > m.max:
		return nil
	case size <= uint64(cap(m.buf)):
		m.buf = m.buf[:size]
	default:
		m.buf = append(m.buf, make([]byte, size-uint64(len(m.buf)))...)
	}
	return m.buf
}

func (m *memory) Free() { m.buf = nil }
