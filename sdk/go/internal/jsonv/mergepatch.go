package jsonv

import (
	"encoding/json"
	"reflect"
)

// MergePatch is the JSON merge patch (RFC 7386) from a to b, two decoded objects: the members
// b changed or added, null for those it removed, objects diffed member by member, anything
// else (arrays included) replaced whole. Empty if a and b are equal.
func MergePatch(a, b map[string]any) map[string]any {
	p := map[string]any{}
	for k, av := range a {
		bv, ok := b[k]
		if !ok {
			p[k] = nil
			continue
		}
		am, aIsMap := av.(map[string]any)
		bm, bIsMap := bv.(map[string]any)
		if aIsMap && bIsMap {
			if d := MergePatch(am, bm); len(d) > 0 {
				p[k] = d
			}
			continue
		}
		if !Equal(av, bv) {
			p[k] = bv
		}
	}
	for k, bv := range b {
		if _, ok := a[k]; !ok {
			p[k] = bv
		}
	}
	return p
}

// Equal compares decoded JSON values: what this package or encoding/json decodes (numbers as
// float64, or json.Number, equal when their values are), and the Go values of an object built
// by hand, compared as reflect.DeepEqual does.
func Equal(a, b any) bool {
	switch a := a.(type) {
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case float64:
		if bn, ok := b.(json.Number); ok {
			y, err := bn.Float64()
			return err == nil && a == y
		}
		bf, ok := b.(float64)
		return ok && a == bf
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case nil:
		return b == nil
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			bf, isFloat := b.(float64)
			x, err := a.Float64()
			return isFloat && err == nil && x == bf
		}
		if a == bn {
			return true
		}
		x, err1 := a.Float64()
		y, err2 := bn.Float64()
		return err1 == nil && err2 == nil && x == y
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !Equal(a[i], bs[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
