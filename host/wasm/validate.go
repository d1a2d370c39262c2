package wasm

import (
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

// validate checks a compiled module against ABI v1: version first, then exports, then imports.
func validate(cm wazero.CompiledModule) (Describe, error) {
	d, err := describe(cm)
	if err != nil {
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
