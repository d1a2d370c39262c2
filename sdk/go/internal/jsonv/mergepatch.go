package jsonv

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
		if !equal(av, bv) {
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

// equal compares decoded JSON values.
func equal(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !equal(v, w) {
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
			if !equal(a[i], bs[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
