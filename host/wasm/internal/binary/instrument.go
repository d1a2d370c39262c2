package binary

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// InterruptExport names the flag global that InstrumentLoops adds and exports: the host sets it
// to 1 to stop the guest within yieldEvery loop iterations.
const InterruptExport = "wasmrec_interrupt"

// ErrReservedExport refuses a module that exports a name the host adds to every module:
// wasmrec_interrupt, or one beginning with "wasmrec:".
var ErrReservedExport = errors.New("the module exports a name the host reserves for what it adds to every module (wasmrec_interrupt, and names beginning with \"wasmrec:\"): rename that export")

// reservedExport says whether the host reserves an export name.
func reservedExport(name string) bool {
	return name == InterruptExport || strings.HasPrefix(name, GlobalExportPrefix)
}

// ErrNotInstrumentable is returned for a module InstrumentLoops cannot rewrite: malformed, using
// an instruction beyond WebAssembly 2.0 with SIMD, or without a memory. Such a module is
// interrupted by wazero's mechanism instead.
var ErrNotInstrumentable = errors.New("not instrumentable")

// Plan is what InstrumentLoops found of a module for its snapshots: the exports of its mutable
// globals, and why its instances cannot start from a snapshot, if they cannot.
type Plan struct {
	Globals []string
	Why     string
}

func (p *Plan) refuse(why string) {
	if p.Why == "" {
		p.Why = why
	}
}

// InstrumentLoops returns wasm with check (see loops.go) at the top of every loop: a countdown
// that every yieldEvery iterations yields to Go and traps if the exported flag global is set.
// Every endless run of WebAssembly code passes a loop header (recursion ends in a stack
// overflow), so the flag stops a guest wherever it spins, for the price of a decrement and a
// branch per iteration.
//
// wazero's own mechanism (RuntimeConfig.WithCloseOnContextDone) leaves machine code for Go at
// every loop header and starts a goroutine per call to watch the context: several times slower
// on guest code, and about 1 µs per call (make bench). DWARF sections are dropped, since their
// code offsets no longer hold.
//
// The same pass prepares the module's snapshots (see host/wasm's snapshot.go): it exports
// every mutable global the module defines (globals.go), and says in the plan whether its state
// after _initialize is all in its memory and those globals. It also merges the module's data
// segments (data.go).
func InstrumentLoops(wasm []byte) ([]byte, Plan, error) {
	var plan Plan
	bin, err := instrument(wasm, &plan)
	return bin, plan, err
}

func instrument(wasm []byte, plan *Plan) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0 binary", ErrNotInstrumentable)
	}
	sections, err := readSections(wasm)
	if err != nil {
		return nil, err
	}

	var importedGlobals, definedGlobals, memories uint32
	var mutable []uint32 // the defined mutable globals, by index
	var data []byte      // the data section with its segments merged (mergeData), if they were
	var dataSegments uint32
	for _, s := range sections {
		switch s.id {
		case 2: // imports
			g, m, err := countImports(s.payload)
			if err != nil {
				return nil, err
			}
			importedGlobals, memories = g, memories+m
			if g+m > 0 {
				plan.refuse("it imports a memory or a global")
			}
		case 5: // memories
			r := reader{b: s.payload}
			memories += r.u32()
		case 6: // globals
			r := reader{b: s.payload}
			definedGlobals = r.u32()
			if r.err != nil {
				return nil, fmt.Errorf("%w: global section: %v", ErrNotInstrumentable, r.err)
			}
			var why string
			if mutable, why = mutableGlobals(s.payload); why != "" {
				plan.refuse(why)
			}
		case 7: // exports
			r := reader{b: s.payload}
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				if name := r.bytes(int(r.u32())); reservedExport(string(name)) {
					return nil, fmt.Errorf("%w: %q", ErrReservedExport, name)
				}
				r.byte()
				r.u32()
			}
		case 8:
			plan.refuse("it has a start section, which runs again in every instance")
		case 11:
			if passiveData(s.payload) {
				plan.refuse("it has passive data segments")
			} else {
				data, dataSegments = mergeData(s.payload)
			}
		}
	}
	if memories == 0 {
		return nil, fmt.Errorf("%w: the module has no memory (the yield point is a memory.grow)", ErrNotInstrumentable)
	}
	if memories > 1 {
		plan.refuse("it has more than one memory")
	}
	flag, count := importedGlobals+definedGlobals, importedGlobals+definedGlobals+1

	out := append(make([]byte, 0, len(wasm)+len(wasm)/16), wasm[:8]...)
	put := func(id byte, payload []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(payload)))
		out = append(out, payload...)
	}
	// (global $flag (mut i32) (i32.const 0)) (global $count (mut i32) (i32.const yieldEvery))
	global := append([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41}, sleb(yieldEvery)...)
	global = append(global, 0x0b)
	export := binary.AppendUvarint(nil, uint64(len(InterruptExport)))
	export = append(export, InterruptExport...)
	export = append(export, 0x03) // global
	export = binary.AppendUvarint(export, uint64(flag))
	export, plan.Globals = appendGlobalExports(export, mutable, importedGlobals)
	exports := uint64(1 + len(mutable))
	addedGlobal, addedExport := false, false
	// Sections in their required order: the global section (6) comes after the memory (5) and
	// tag (13) sections, the export section (7) after it.
	order := func(id byte) int {
		switch id {
		case 0:
			return -1 // custom sections stay where they are
		case 13:
			return 55 // tags sit between memory (5) and global (6)
		case 12:
			return 95 // data count sits between element (9) and code (10)
		}
		return int(id) * 10
	}
	addGlobal := func() {
		if !addedGlobal {
			put(6, append(binary.AppendUvarint(nil, 2), global...))
			addedGlobal = true
		}
	}
	addExport := func() {
		if !addedExport {
			put(7, append(binary.AppendUvarint(nil, exports), export...))
			addedExport = true
		}
	}
	for _, s := range sections {
		if o := order(s.id); o > 60 {
			addGlobal()
		}
		if o := order(s.id); o > 70 {
			addExport()
		}
		switch s.id {
		case 0:
			if name, ok := customName(s.payload); ok && strings.HasPrefix(name, ".debug_") {
				continue
			}
			put(0, s.payload)
		case 6:
			put(6, appendToVector(s.payload, 2, global))
			addedGlobal = true
		case 7:
			put(7, appendToVector(s.payload, exports, export))
			addedExport = true
		case 10:
			code, tables, err := instrumentCode(s.payload, flag, count)
			if err != nil {
				return nil, err
			}
			if tables {
				plan.refuse("its code changes tables")
			}
			put(10, code)
		case 11:
			if data != nil {
				put(11, data)
			} else {
				put(11, s.payload)
			}
		case 12: // data count
			if data != nil {
				put(12, binary.AppendUvarint(nil, uint64(dataSegments)))
			} else {
				put(12, s.payload)
			}
		default:
			put(s.id, s.payload)
		}
	}
	addGlobal()
	addExport()
	return out, nil
}

// countImports counts the globals and memories an import section imports.
func countImports(payload []byte) (globals, memories uint32, err error) {
	r := reader{b: payload}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.bytes(int(r.u32())) // module
		r.bytes(int(r.u32())) // name
		switch kind := r.byte(); kind {
		case 0x00: // func
			r.u32()
		case 0x01: // table
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
			memories++
		case 0x03: // global
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			return 0, 0, fmt.Errorf("%w: import kind 0x%02x", ErrNotInstrumentable, kind)
		}
	}
	if r.err != nil {
		return 0, 0, fmt.Errorf("%w: import section: %v", ErrNotInstrumentable, r.err)
	}
	return globals, memories, nil
}
