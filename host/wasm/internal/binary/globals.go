package binary

import (
	"encoding/binary"
	"fmt"
)

// GlobalExportPrefix names the exports InstrumentLoops adds for the mutable globals a module
// defines, so that the host can read and set them; a module may not export names beginning
// with it.
const GlobalExportPrefix = "wasmrec:global:"

// mutableGlobals returns the indexes (among the defined globals) of the mutable globals of a
// global section, or why a snapshot could not hold them.
func mutableGlobals(payload []byte) (mutable []uint32, why string) {
	r := reader{b: payload}
	for i, n := uint32(0), r.u32(); i < n && r.err == nil; i++ {
		typ, mut := r.byte(), r.byte()
		if !skipConstExpr(&r) {
			return nil, "its global section has an initialiser the host does not read"
		}
		if mut == 0 {
			continue
		}
		switch typ {
		case 0x7f, 0x7e, 0x7d, 0x7c: // i32, i64, f32, f64
			mutable = append(mutable, i)
		default:
			return nil, "it has a mutable global of a vector or reference type"
		}
	}
	if r.err != nil {
		return nil, "its global section is malformed"
	}
	return mutable, ""
}

// appendGlobalExports appends to export an export entry for each of the mutable globals, given
// by their indexes among the defined globals (which come after the imported ones), and returns
// the names it gave them, in order: GlobalExportPrefix and the global's index.
func appendGlobalExports(export []byte, mutable []uint32, importedGlobals uint32) ([]byte, []string) {
	var names []string
	for _, g := range mutable {
		name := fmt.Sprintf("%s%d", GlobalExportPrefix, importedGlobals+g)
		names = append(names, name)
		export = binary.AppendUvarint(export, uint64(len(name)))
		export = append(export, name...)
		export = append(export, 0x03)
		export = binary.AppendUvarint(export, uint64(importedGlobals+g))
	}
	return export, names
}
