package binary

import (
	"encoding/binary"
	"fmt"
)

// reader decodes the parts of a binary module the passes need. The first error sticks.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) done() bool { return r.off >= len(r.b) }

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("truncated or malformed %s at byte %d", what, r.off)
	}
	r.off = len(r.b)
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.fail("byte")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.off {
		r.fail("bytes")
		return nil
	}
	r.off += n
	return r.b[r.off-n : r.off]
}

func (r *reader) u32() uint32 {
	v, n := binary.Uvarint(r.b[min(r.off, len(r.b)):])
	if n <= 0 || n > 5 || v > 1<<32-1 {
		r.fail("u32")
		return 0
	}
	r.off += n
	return uint32(v)
}

func (r *reader) limits() {
	switch flags := r.byte(); flags {
	case 0x00:
		r.u32()
	case 0x01, 0x03: // max; 0x03 shared
		r.u32()
		r.u32()
	default:
		r.fail("limits")
	}
}

// leb skips a LEB128 number, signed or not, of up to 64 bits.
func (r *reader) leb() {
	for n := 0; n < 10; n++ {
		if r.byte()&0x80 == 0 || r.err != nil {
			return
		}
	}
	r.fail("leb128")
}

// s32 reads a signed LEB128 number of up to 32 bits.
func (r *reader) s32() int32 {
	var v int64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return int32(v)
		}
	}
	r.fail("s32")
	return 0
}

// sleb encodes a non-negative int32 as signed LEB128.
func sleb(v int32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// appendSleb appends v as signed LEB128.
func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// section is one section of a module: its id and its payload, a part of the module's bytes.
type section struct {
	id      byte
	payload []byte
}

// readSections splits a module, past its 8-byte header, into its sections, in order.
func readSections(wasm []byte) ([]section, error) {
	var sections []section
	for r := (reader{b: wasm, off: 8}); !r.done(); {
		id := r.byte()
		size := r.u32()
		payload := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("%w: section %d: %v", ErrNotInstrumentable, id, r.err)
		}
		sections = append(sections, section{id, payload})
	}
	return sections, nil
}

// appendToVector adds one encoded entry to a section that is a vector (count, then entries).
func appendToVector(payload []byte, entries uint64, entry []byte) []byte {
	r := reader{b: payload}
	n := r.u32()
	out := binary.AppendUvarint(nil, uint64(n)+entries)
	out = append(out, payload[r.off:]...)
	return append(out, entry...)
}

// customName reads the name a custom section's payload begins with.
func customName(payload []byte) (string, bool) {
	r := reader{b: payload}
	n := r.u32()
	name := r.bytes(int(n))
	return string(name), r.err == nil
}

// skipConstExpr reads past a constant expression and its end.
func skipConstExpr(r *reader) bool {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b:
			return true
		case 0x41, 0x42, 0x23, 0xd2: // i32.const, i64.const, global.get, ref.func
			r.leb()
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0xd0: // ref.null
			r.byte()
		case 0xfd: // v128.const
			if r.u32() != 12 {
				return false
			}
			r.bytes(16)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		default:
			return false
		}
	}
	return false
}
