package wasm

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmrec/wasmrec/abi"
)

const wasiModule = "wasi_snapshot_preview1"

// Describe is what a compiled module exposes, read without running it.
type Describe struct {
	// ABIVersion is N of the wasmrec_abi_vN export; 0 if there is none.
	ABIVersion int
	Exports    []string // name: signature
	Imports    []string // module.name: signature
}

func signature(params, results []api.ValueType) string {
	name := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return name(params) + " -> " + name(results)
}

func abiSignature(s abi.Signature) string {
	conv := func(ts []abi.ValueType) []api.ValueType {
		out := make([]api.ValueType, len(ts))
		for i, t := range ts {
			out[i] = api.ValueType(t)
		}
		return out
	}
	return signature(conv(s.Params), conv(s.Results))
}

// describe lists a compiled module's exports and imports and finds its ABI version marker.
func describe(cm wazero.CompiledModule) (Describe, error) {
	var d Describe
	var versions []string
	for name, def := range cm.ExportedFunctions() {
		d.Exports = append(d.Exports, name+": "+signature(def.ParamTypes(), def.ResultTypes()))
		if v, ok := strings.CutPrefix(name, abi.VersionExportPrefix); ok {
			versions = append(versions, name)
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d, fmt.Errorf("invalid export[%q]: not a version marker (want %s<N>)", name, abi.VersionExportPrefix)
			}
			d.ABIVersion = n
		}
	}
	for name := range cm.ExportedMemories() {
		d.Exports = append(d.Exports, name+": memory")
	}
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		d.Imports = append(d.Imports, mod+"."+name+": "+signature(def.ParamTypes(), def.ResultTypes()))
	}
	slices.Sort(d.Exports)
	slices.Sort(d.Imports)
	if len(versions) > 1 {
		slices.Sort(versions)
		return d, fmt.Errorf("the module exports several ABI version markers %v: export exactly one", versions)
	}
	return d, nil
}

// buildAdvice is how plugins are built, for the errors of modules built otherwise.
const buildAdvice = "build it with `wasmrec build`, which runs GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared for Go and clang --target=wasm32-wasi -mexec-model=reactor for C"

// header is a module's first 8 bytes: the magic and version 1.
const header = "\x00asm\x01\x00\x00\x00"

// Truncated reports whether b is the start of a WebAssembly module cut short: a part of its
// header, or a header and sections whose last one runs past the end. A file being written in
// place reads so. It walks the section headers only (an id byte and a LEB128 size each), so it
// costs a few microseconds even for a large module; bytes that are not WebAssembly at all are
// not truncated.
func Truncated(b []byte) bool {
	if len(b) < len(header) {
		return len(b) > 0 && header[:len(b)] == string(b)
	}
	if string(b[:len(header)]) != header {
		return false
	}
	for i := len(header); i < len(b); {
		i++ // the section id
		var size uint64
		for shift := 0; ; shift += 7 {
			if i >= len(b) {
				return true // the size runs past the end
			}
			c := b[i]
			i++
			size |= uint64(c&0x7f) << shift
			if c < 0x80 {
				break
			}
			if shift >= 28 {
				return false // not a u32: malformed, not truncated
			}
		}
		if size > uint64(len(b)-i) {
			return true
		}
		i += int(size)
	}
	return false
}

// checkBinary says what a file that is not WebAssembly is, and how to build a plugin instead.
func checkBinary(b []byte) error {
	if Truncated(b) {
		return fmt.Errorf("the module is cut short: its last section runs past its %d bytes (a truncated copy, or a file read while it was still being written)", len(b))
	}
	if bytes.HasPrefix(b, []byte("\x00asm")) {
		return nil
	}
	what := "not WebAssembly (no \\0asm header)"
	switch {
	case len(b) == 0:
		what = "empty"
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		what = "an ELF executable, built for this machine: GOOS=wasip1 GOARCH=wasm is missing"
	case bytes.HasPrefix(b, []byte{0xcf, 0xfa, 0xed, 0xfe}) || bytes.HasPrefix(b, []byte{0xce, 0xfa, 0xed, 0xfe}) || bytes.HasPrefix(b, []byte{0xca, 0xfe, 0xba, 0xbe}):
		what = "a Mach-O executable, built for this machine: GOOS=wasip1 GOARCH=wasm is missing"
	case bytes.HasPrefix(b, []byte("MZ")):
		what = "a Windows executable, built for this machine: GOOS=wasip1 GOARCH=wasm is missing"
	case bytes.HasPrefix(b, []byte("!<arch>")):
		what = "an archive (a Go package built without a main package?)"
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		what = "gzip data (an image layer? push and pull plugins with wasmrec push and pull)"
	case bytes.HasPrefix(b, []byte("(module")):
		what = "WebAssembly text (.wat): compile it to binary first"
	}
	return fmt.Errorf("not a WebAssembly module: the file is %s: %s", what, buildAdvice)
}

// checkBuild finds the usual build mistakes, which would otherwise show as a missing export or
// an "unreachable" trap.
func checkBuild(cm wazero.CompiledModule) error {
	for _, def := range cm.ImportedFunctions() {
		if mod, _, _ := def.Import(); mod == "gojs" {
			return fmt.Errorf("built with GOOS=js, for browsers: plugins are built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared; %s", buildAdvice)
		}
	}
	exports := cm.ExportedFunctions()
	if _, start := exports["_start"]; start {
		if _, init := exports[abi.ExportInitialize]; !init {
			return fmt.Errorf("built as a WASI command (it exports _start, not %s): a plugin is a library the host calls; Go needs -buildmode=c-shared, C -mexec-model=reactor; %s", abi.ExportInitialize, buildAdvice)
		}
	}
	return nil
}

// validate checks a compiled module against ABI v1: version first, then exports, then imports.
func validate(cm wazero.CompiledModule) (Describe, error) {
	d, err := describe(cm)
	if err != nil {
		return d, err
	}
	if err := checkBuild(cm); err != nil {
		return d, err
	}
	switch d.ABIVersion {
	case 0:
		return d, fmt.Errorf("not a wasmrec plugin: no %s<N> export (build it with sdk/go or sdk/c, which export %s)", abi.VersionExportPrefix, abi.ExportVersion)
	case abi.Version:
	default:
		return d, fmt.Errorf("plugin speaks ABI v%d, host speaks v%d: rebuild it with an SDK for ABI v%d", d.ABIVersion, abi.Version, abi.Version)
	}
	exports := cm.ExportedFunctions()
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(abi.Exports)) {
		want := abiSignature(abi.Exports[name])
		def, ok := exports[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("missing export[%q] %s", name, want))
			continue
		}
		if got := signature(def.ParamTypes(), def.ResultTypes()); got != want {
			problems = append(problems, fmt.Sprintf("invalid export[%q]: signature %s, want %s", name, got, want))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(abi.OptionalExports)) {
		want := abiSignature(abi.OptionalExports[name])
		if def, ok := exports[name]; ok {
			if got := signature(def.ParamTypes(), def.ResultTypes()); got != want {
				problems = append(problems, fmt.Sprintf("invalid export[%q]: signature %s, want %s", name, got, want))
			}
		}
	}
	if def, ok := exports[abi.ExportInitialize]; ok && (len(def.ParamTypes()) > 0 || len(def.ResultTypes()) > 0) {
		problems = append(problems, fmt.Sprintf("invalid export[%q]: must take and return nothing", abi.ExportInitialize))
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		problems = append(problems, `missing export["memory"]`)
	}
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		got := signature(def.ParamTypes(), def.ResultTypes())
		switch mod {
		case abi.ImportModule:
			want, ok := abi.HostFunctions[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("invalid import[%q.%q]: the host has no such function in ABI v%d", mod, name, abi.Version))
			} else if w := abiSignature(want); got != w {
				problems = append(problems, fmt.Sprintf("invalid import[%q.%q]: signature %s, want %s", mod, name, got, w))
			}
		case wasiModule:
			// wazero checks names and signatures when it links the instance.
		default:
			problems = append(problems, fmt.Sprintf("invalid import[%q.%q]: the host provides only modules %q and %q", mod, name, abi.ImportModule, wasiModule))
		}
	}
	if len(problems) > 0 {
		return d, fmt.Errorf("not a valid ABI v%d plugin: %s", abi.Version, strings.Join(problems, "; "))
	}
	return d, nil
}
