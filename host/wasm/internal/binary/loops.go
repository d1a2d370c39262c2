package binary

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// yieldEvery is how many loop iterations run between two yield points.
const yieldEvery = 4096

// check is the instruction sequence put at the top of each loop. Every yieldEvery iterations
// (all loops of the instance count down one counter) it yields, then traps if the flag is set:
//
//	global.get $count; i32.const 1; i32.sub; global.set $count
//	global.get $count; i32.eqz
//	if
//	  i32.const 0; memory.grow 0; drop   ;; the yield point
//	  global.get $flag; if; unreachable; end
//	  i32.const yieldEvery; global.set $count
//	end
//
// The yield point matters as much as the flag: wazero runs guest code as machine code the Go
// scheduler cannot preempt, so a guest that never leaves it would hold up every stop-the-world
// of the process (each GC), and with it the timer that sets the flag. memory.grow, even by 0,
// leaves the machine code for Go, where the goroutine can be preempted.
func check(flag, count uint32) []byte {
	getCount := binary.AppendUvarint([]byte{0x23}, uint64(count))
	setCount := binary.AppendUvarint([]byte{0x24}, uint64(count))
	b := append([]byte(nil), getCount...)
	b = append(b, 0x41, 0x01, 0x6b)
	b = append(b, setCount...)
	b = append(b, getCount...)
	b = append(b, 0x45, 0x04, 0x40)
	b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a)
	b = binary.AppendUvarint(append(b, 0x23), uint64(flag))
	b = append(b, 0x04, 0x40, 0x00, 0x0b)
	b = append(append(b, 0x41), sleb(yieldEvery)...)
	b = append(b, setCount...)
	return append(b, 0x0b)
}

// instrumentCode rewrites the code section, inserting check after every loop instruction. The
// functions are split into one run per CPU, instrumented side by side (a 16 MB Go module has
// ~15 MB of code), and joined in order. tables says whether any function changes a table.
func instrumentCode(payload []byte, flag, count uint32) (_ []byte, tables bool, _ error) {
	chk := check(flag, count)
	r := reader{b: payload}
	n := r.u32()
	fns := make([][]byte, n)
	for i := range fns {
		size := r.u32()
		fns[i] = r.bytes(int(size))
	}
	if r.err != nil {
		return nil, false, fmt.Errorf("%w: code section: %v", ErrNotInstrumentable, r.err)
	}
	if !r.done() {
		return nil, false, fmt.Errorf("%w: code section: bytes after the last function", ErrNotInstrumentable)
	}
	workers := min(runtime.GOMAXPROCS(0), max(len(payload)>>20, 1)) // parallel from 1 MiB up
	parts := make([][]byte, workers)
	errs := make([]error, workers)
	changes := make([]bool, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := len(fns)*w/workers, len(fns)*(w+1)/workers
		wg.Go(func() {
			var body []byte
			out := make([]byte, 0, len(payload)/workers+len(payload)/16)
			for i := lo; i < hi; i++ {
				var err error
				if body, err = instrumentBody(body[:0], fns[i], chk, &changes[w]); err != nil {
					errs[w] = fmt.Errorf("%w: function %d: %v", ErrNotInstrumentable, i, err)
					return
				}
				out = binary.AppendUvarint(out, uint64(len(body)))
				out = append(out, body...)
			}
			parts[w] = out
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	out := binary.AppendUvarint(make([]byte, 0, size+5), uint64(n))
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, slices.Contains(changes, true), nil
}

// instrumentBody copies one function body to out, with chk after every loop's block type. It
// decodes every instruction of WebAssembly 2.0 (with SIMD) to find them; any other opcode is an
// error. It indexes fn directly (a reader call per byte made loading a 16 MB module ~4x slower);
// a truncated body runs off fn's end, which is recovered as an error. It sets *tables if the
// body changes a table (table.set, table.init, elem.drop, table.copy, table.grow, table.fill).
func instrumentBody(out, fn, chk []byte, tables *bool) (_ []byte, err error) {
	defer func() {
		if recover() != nil {
			err = errors.New("truncated function body")
		}
	}()
	i := 0
	leb := func() { // skips a LEB128 number
		for fn[i]&0x80 != 0 {
			i++
		}
		i++
	}
	u32 := func() uint32 {
		var v uint32
		for shift := 0; ; shift += 7 {
			c := fn[i]
			i++
			v |= uint32(c&0x7f) << shift
			if c&0x80 == 0 || shift > 28 {
				return v
			}
		}
	}
	blockType := func() { // 0x40, a one-byte value type, or a type index (s33)
		if fn[i]&0xc0 == 0x40 {
			i++
			return
		}
		leb()
	}
	for groups := u32(); groups > 0; groups-- { // locals
		leb()
		i++
	}
	mark := 0
	for i < len(fn) {
		op := fn[i]
		i++
		switch {
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
			op >= 0x45 && op <= 0xc4: // no immediates
		case op == 0x02, op == 0x04: // block, if
			blockType()
		case op == 0x03: // loop
			blockType()
			out = append(out, fn[mark:i]...)
			out = append(out, chk...)
			mark = i
		case op == 0x26: // table.set
			*tables = true
			leb()
		case op == 0x0c, op == 0x0d, op == 0x10, op >= 0x20 && op <= 0x25, op == 0xd2, // one index
			op == 0x3f, op == 0x40, op == 0x41, op == 0x42: // memory.size, memory.grow, i32.const, i64.const
			leb()
		case op == 0x0e: // br_table
			for n := u32(); n > 0; n-- {
				leb()
			}
			leb()
		case op == 0x11, op >= 0x28 && op <= 0x3e: // call_indirect; loads and stores (memarg)
			leb()
			leb()
		case op == 0x1c: // select t*
			i += int(u32())
		case op == 0x43:
			i += 4
		case op == 0x44:
			i += 8
		case op == 0xd0: // ref.null
			i++
		case op == 0xfc:
			sub := u32()
			if sub >= 12 && sub <= 17 && sub != 16 { // table.size (16) only reads
				*tables = true
			}
			switch {
			case sub <= 7: // saturating truncations
			case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
				leb()
				leb()
			case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
				leb()
			default:
				return nil, fmt.Errorf("opcode 0xfc %d", sub)
			}
		case op == 0xfd:
			switch sub := u32(); {
			case sub <= 11, sub == 92, sub == 93: // v128 loads and stores
				leb()
				leb()
			case sub == 12, sub == 13: // v128.const, i8x16.shuffle
				i += 16
			case sub >= 21 && sub <= 34: // extract and replace lane
				i++
			case sub >= 84 && sub <= 91: // load and store lane
				leb()
				leb()
				i++
			case sub <= 255:
			default:
				return nil, fmt.Errorf("opcode 0xfd %d", sub)
			}
		default:
			return nil, fmt.Errorf("opcode 0x%02x", op)
		}
	}
	if i != len(fn) {
		return nil, errors.New("an immediate runs past the function's end")
	}
	return append(out, fn[mark:]...), nil
}
