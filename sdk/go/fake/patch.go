package fake

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

// mergePatch applies a JSON merge patch (RFC 7386) to target and returns the result; target is
// not changed.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return deepCopy(patch)
	}
	tm, ok := target.(map[string]any)
	if ok {
		tm = copyMap(tm)
	} else {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergePatch(tm[k], v)
	}
	return tm
}

// patchMember is what a strategic merge patch knows of a member of a built-in kind's type
// (zz_generated.patchmeta.go, from k8s.io/api's patchStrategy and patchMergeKey tags): its
// strategy ("merge", "retainKeys", "merge,retainKeys" or ""), a list's merge key, and the index
// in patchTypes of its value's struct type (a list's items'), or -1, and whether it is a list.
type patchMember struct {
	name, strategy, key string
	value               int32
	list                bool // a JSON array; else an object
}

// kind is the JSON type of the member's value, as kindOfJSON names it.
func (m patchMember) kind() string {
	if m.list {
		return "array"
	}
	return "object"
}

// patchMeta is a struct type's members in patchTypes, or nil where there is no metadata (a
// custom resource, or a value that is not a generated struct).
type patchMeta []patchMember

// metaOf is the patch metadata of a kind, or nil if it is not a built-in kind.
func metaOf(apiVersion, kind string) patchMeta {
	if i, ok := patchKinds[apiVersion+"/"+kind]; ok {
		return patchTypes[i]
	}
	return nil
}

// member is what t says of the member name: found is false for a member it does not list (one
// the type does not have: the fake stores any member), which is merged without metadata.
func (t patchMeta) member(name string) (m patchMember, value patchMeta, found bool) {
	for _, m := range t {
		if m.name == name {
			if m.value >= 0 {
				value = patchTypes[m.value]
			}
			return m, value, true
		}
	}
	return patchMember{}, nil, false
}

// strategicPatch applies a strategic merge patch to target as the API server does, and returns
// the result; target is not changed. With the type's patch metadata (meta, as the API server
// reads it from k8s.io/api's tags), a list is merged by its merge key, or by value, where its
// field's strategy is "merge", and replaced where it is not. A member without metadata (of a
// custom resource, or one the type does not have) merges a list by what the patch itself says:
// by the key that a "$setElementOrder/NAME" (StrategicMergeFrom writes one for every such list
// it changes) or an item {"$patch": "delete", KEY: ...} names, or by value for a list of
// values with a "$setElementOrder/NAME" or "$deleteFromPrimitiveList/NAME"; any other list is
// replaced whole. "$retainKeys" clears the members it does not list; {"$patch": "replace"}
// replaces an object and {"$patch": "delete"} deletes it. Any other member whose name begins
// with $ is a member, as the API server takes it.
func strategicPatch(target, patch map[string]any, meta patchMeta) (map[string]any, error) {
	if d, ok := patch["$patch"]; ok {
		switch d {
		case "replace":
			out := copyMap(patch) // as it is, but for the directive
			delete(out, "$patch")
			return out, nil
		case "delete":
			return map[string]any{}, nil
		}
		return nil, fmt.Errorf("unknown patch type: %v in map", d)
	}
	out := copyMap(target)
	if out == nil {
		out = map[string]any{}
	}
	if keep, ok := patch["$retainKeys"]; ok {
		list, ok := keep.([]any)
		if !ok {
			return nil, fmt.Errorf("$retainKeys must be a list, not %v", keep)
		}
		for k := range out {
			if !slices.Contains(list, any(k)) {
				delete(out, k)
			}
		}
	}
	for k, v := range patch {
		switch {
		case k == "$retainKeys", strings.HasPrefix(k, "$setElementOrder/"):
			continue
		case strings.HasPrefix(k, "$deleteFromPrimitiveList/"):
			name := strings.TrimPrefix(k, "$deleteFromPrimitiveList/")
			drop, _ := v.([]any)
			if cur, ok := out[name].([]any); ok {
				out[name] = slices.DeleteFunc(slices.Clone(cur), func(x any) bool { return slices.ContainsFunc(drop, func(d any) bool { return jsonv.Equal(d, x) }) })
			}
			continue
		case v == nil:
			delete(out, k)
			continue
		}
		m, value, known := meta.member(k)
		if known && kindOfJSON(v) != m.kind() {
			// The API server decodes the patched object into the kind's type, which refuses it.
			want := "struct"
			if m.list {
				want = "slice"
			}
			return nil, fail(abi.StatusInvalid, "cannot restore %s from %s", want, goKind(v))
		}
		tv, exists := out[k]
		if _, ordered := patch["$setElementOrder/"+k]; ordered && !exists && kindOfJSON(v) == "array" {
			// A list the object lacks, with an order: as the API server takes it, nulls kept.
			out[k], _ = newValue(v, false)
			continue
		}
		if !exists || kindOfJSON(tv) != kindOfJSON(v) {
			// A member the object lacks, or of another type, is the patch's value, as the
			// API server takes it: without its nulls, or its objects that hold a $patch.
			if nv, keep := newValue(v, true); keep {
				out[k] = nv
			} else {
				delete(out, k)
			}
			continue
		}
		switch pv := v.(type) {
		case map[string]any:
			merged, err := strategicPatch(tv.(map[string]any), pv, value)
			if err != nil {
				return nil, err
			}
			out[k] = merged
		case []any:
			order, _ := patch["$setElementOrder/"+k].([]any)
			_, deletes := patch["$deleteFromPrimitiveList/"+k]
			how := listMerge{order: order, deletes: deletes, items: value}
			if known {
				how.known, how.merge, how.key = true, strings.Contains(m.strategy, "merge"), m.key
			}
			merged, err := mergeList(tv.([]any), pv, how)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = merged
		default:
			out[k] = deepCopy(v)
		}
	}
	for k, v := range patch {
		name, ok := strings.CutPrefix(k, "$setElementOrder/")
		if !ok {
			continue
		}
		order, isList := v.([]any)
		cur, hasList := out[name].([]any)
		if !isList || !hasList {
			continue
		}
		before, _ := target[name].([]any)
		key := listKey(order, nil)
		if m, _, ok := meta.member(name); ok && m.key != "" {
			key = m.key
		}
		out[name] = normalizeOrder(cur, order, before, key)
	}
	return out, nil
}

// listKey is the merge key that the patch's order list or a deletion names, or "" if none
// does.
func listKey(order, items []any) string {
	for _, l := range [][]any{order, items} {
		for _, v := range l {
			m, ok := v.(map[string]any)
			if !ok {
				continue
			}
			for k := range m {
				if k != "$patch" {
					return k
				}
			}
		}
	}
	return ""
}

// listMerge is how mergeList merges a list: with the patch's directives for it, and, where
// the object's type has patch metadata (known), whether its field merges (merge) and by which
// key ("" for a list of values), and the metadata of its items.
type listMerge struct {
	order   []any
	deletes bool
	known   bool
	merge   bool
	key     string
	items   patchMeta
}

// mergeList merges the patch's list into target's: by the merge key, or by value for a list
// of values, where the metadata says the field merges (without metadata, where the patch names
// a key, or has an order or deletions for a list of values); else it is replaced.
func mergeList(target, patch []any, how listMerge) ([]any, error) {
	key, byValue := how.key, how.merge && how.key == ""
	if !how.known {
		key = listKey(how.order, nil)
		if key == "" {
			for _, v := range patch {
				if m, ok := v.(map[string]any); ok && m["$patch"] == "delete" {
					key = listKey(nil, []any{v})
					break
				}
			}
		}
		byValue = (len(patch) == 0 || !isObject(patch[0])) && (how.order != nil || how.deletes)
	} else if !how.merge {
		key = ""
	}
	switch {
	case key != "":
		out := slices.Clone(target)
		var items []any
		replace := false
		for _, v := range patch { // the items with a $patch first: deletions of every item of the key
			m, ok := v.(map[string]any)
			d, special := m["$patch"]
			if !ok || !special {
				items = append(items, v)
				continue
			}
			switch d {
			case "delete":
				if _, ok := m[key]; !ok {
					return nil, noMergeKey(m, key)
				}
				out = slices.DeleteFunc(out, func(x any) bool {
					xm, ok := x.(map[string]any)
					return ok && jsonv.Equal(xm[key], m[key])
				})
			case "replace":
				replace = true // the list is the patch's other items
			case "merge":
				return nil, fail(abi.StatusUnavailable, "merging lists cannot yet be specified in the patch")
			default:
				return nil, fail(abi.StatusUnavailable, "unknown patch type: %v in map: %s", d, goMap(m))
			}
		}
		if replace {
			return deepCopy(items).([]any), nil
		}
		before := slices.Clone(out)
		for _, v := range items {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("a list merged by %q holds %v, not an object", key, v)
			}
			if _, ok := m[key]; !ok {
				return nil, noMergeKey(m, key)
			}
			at := slices.IndexFunc(out, func(x any) bool {
				xm, ok := x.(map[string]any)
				return ok && jsonv.Equal(xm[key], m[key])
			})
			if at < 0 {
				out = append(out, deepCopy(m)) // a new item, as it is
				continue
			}
			merged, err := strategicPatch(out[at].(map[string]any), m, how.items)
			if err != nil {
				return nil, err
			}
			out[at] = merged
		}
		return normalizeOrder(out, items, before, key), nil
	case byValue:
		out := slices.Clone(target)
		for _, v := range patch {
			if !slices.ContainsFunc(out, func(x any) bool { return jsonv.Equal(x, v) }) {
				out = append(out, deepCopy(v))
			}
		}
		return normalizeOrder(out, patch, target, ""), nil
	}
	return deepCopy(patch).([]any), nil // replaced, as it is
}

// noMergeKey is the API server's answer to an item of a list merged by key that lacks the key:
// an internal error, which the host gives the plugin as unavailable.
func noMergeKey(item map[string]any, key string) error {
	return fail(abi.StatusUnavailable, "map: %s does not contain declared merge key: %s", goMap(item), key)
}

// goMap is m as the API server's messages print it (Go's %v of a map).
func goMap(m map[string]any) string { return fmt.Sprintf("%v", m) }

// goKind is the Go kind of a decoded JSON value, as the API server's messages name it.
func goKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "map"
	case []any:
		return "slice"
	case string:
		return "string"
	case bool:
		return "bool"
	case nil:
		return "nil"
	}
	return "float64"
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// kindOfJSON names the JSON type of a decoded value, for telling a member's change of type.
func kindOfJSON(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case nil:
		return "null"
	}
	return "scalar"
}

// newValue is a patch's value for a member the object lacks: a copy without the objects that
// hold a $patch directive, and without nulls if dropNulls; keep is false if v is such an
// object.
func newValue(v any, dropNulls bool) (_ any, keep bool) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["$patch"]; ok {
			return nil, false
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			if e == nil && dropNulls {
				continue
			}
			if ne, keep := newValue(e, dropNulls); keep {
				out[k] = ne
			}
		}
		return out, true
	case []any:
		out := []any{}
		for _, e := range v {
			if ne, keep := newValue(e, dropNulls); keep {
				out = append(out, ne)
			}
		}
		return out, true
	}
	return v, true
}

// normalizeOrder orders a merged list as the API server does: the items order names (by key,
// or by value in a list of values) in its order, and among them the others (the server's
// own), in the order they had in before, each placed before the first of the order's items
// that came after it in before.
func normalizeOrder(list, order, before []any, key string) []any {
	id := func(v any) any {
		if m, ok := v.(map[string]any); ok && key != "" {
			return m[key]
		}
		return v
	}
	index := func(l []any, v any) int {
		return slices.IndexFunc(l, func(o any) bool { return jsonv.Equal(id(o), id(v)) })
	}
	var named, own []any
	for _, v := range list {
		if index(order, v) >= 0 {
			named = append(named, v)
		} else {
			own = append(own, v)
		}
	}
	byIndex := func(l []any) func(i, j int) bool {
		return func(i, j int) bool {
			if a := index(l, named[i]); a >= 0 {
				if b := index(l, named[j]); b >= 0 {
					return a < b
				}
			}
			return true
		}
	}
	sort.SliceStable(named, byIndex(order))
	sort.SliceStable(own, func(i, j int) bool {
		if a := index(before, own[i]); a >= 0 {
			if b := index(before, own[j]); b >= 0 {
				return a < b
			}
		}
		return true
	})
	out := make([]any, 0, len(list))
	i, j := 0, 0
	for i < len(own) || j < len(named) {
		switch {
		case i >= len(own):
			out = append(out, named[j])
			j++
		case j >= len(named):
			out = append(out, own[i])
			i++
		default:
			a, b := index(before, own[i]), index(before, named[j])
			if a >= 0 && b >= 0 && a < b {
				out = append(out, own[i])
				i++
			} else {
				out = append(out, named[j])
				j++
			}
		}
	}
	return out
}

// A JSON patch (RFC 6902) as the API server applies it, with gopkg.in/evanphx/json-patch.v4,
// which is more lenient than the RFC: "replace" of a missing member adds it, array indices may
// be negative (-1 is the last element; for "add", -1 appends) or have leading zeros, a missing
// "value" is null, "test" of a missing member against null passes and "copy" of one copies
// null, and a path's first token is dropped whatever it is ("a/b" is "/b"). A path "" is the
// whole document for "replace" and "test" only.

// jsonPatchOp is one operation of a JSON patch.
type jsonPatchOp struct {
	Op    string           `json:"op"`
	Path  *string          `json:"path"`
	From  *string          `json:"from"`
	Value *json.RawMessage `json:"value"` // nil: missing or null
}

// decodeJSONPatch decodes a JSON patch; an error is a malformed patch (bad request).
func decodeJSONPatch(raw []byte) ([]jsonPatchOp, error) {
	var ops []jsonPatchOp
	if err := json.Unmarshal(raw, &ops); err != nil {
		return nil, err
	}
	return ops, nil
}

// applyJSONPatch applies ops to doc in order and returns the result; an error is an operation
// that cannot be applied (the API server's 422: invalid). doc is not changed.
func applyJSONPatch(doc any, ops []jsonPatchOp) (any, error) {
	doc = deepCopy(doc)
	for i, op := range ops {
		var err error
		doc, err = applyOp(doc, op)
		if err != nil {
			return nil, fmt.Errorf("json patch operation %d (%s): %w", i, op.Op, err)
		}
	}
	return doc, nil
}

func applyOp(doc any, op jsonPatchOp) (any, error) {
	var value any
	if op.Value != nil {
		v, err := decodeJSON(*op.Value)
		if err != nil {
			return nil, err
		}
		value = v
	}
	path := func(p *string, what string) ([]string, string, error) {
		if p == nil {
			return nil, "", fmt.Errorf("missing %s", what)
		}
		parents, key, ok := splitPath(*p)
		if !ok {
			return nil, "", fmt.Errorf("doc is missing path: %q", *p)
		}
		return parents, key, nil
	}
	if op.Path != nil && *op.Path == "" && (op.Op == "replace" || op.Op == "test") {
		if op.Op == "test" {
			if !jsonv.Equal(doc, value) {
				return nil, fmt.Errorf("testing value %s failed: test failed", *op.Path)
			}
			return doc, nil
		}
		switch value.(type) {
		case map[string]any, []any:
			return value, nil
		}
		return nil, fmt.Errorf("replace operation value must be object or array")
	}
	switch op.Op {
	case "add", "remove", "replace", "test":
		parents, key, err := path(op.Path, "path")
		if err != nil {
			return nil, err
		}
		return inContainer(doc, parents, func(c any) (any, error) {
			switch op.Op {
			case "add":
				return addMember(c, key, value)
			case "remove":
				return removeMember(c, key)
			case "replace":
				if _, err := member(c, key); err != nil {
					return nil, err
				}
				return setMember(c, key, value)
			}
			got, err := member(c, key)
			if err != nil {
				return nil, err
			}
			if !jsonv.Equal(got, value) {
				return nil, fmt.Errorf("testing value %s failed: test failed", *op.Path)
			}
			return c, nil
		})
	case "move", "copy":
		fromParents, fromKey, err := path(op.From, "from")
		if err != nil {
			return nil, err
		}
		var v any
		doc, err = inContainer(doc, fromParents, func(c any) (any, error) {
			if v, err = member(c, fromKey); err != nil {
				return nil, err
			}
			if op.Op == "move" {
				return removeMember(c, fromKey)
			}
			v = deepCopy(v)
			return c, nil
		})
		if err != nil {
			return nil, err
		}
		parents, key, err := path(op.Path, "path")
		if err != nil {
			return nil, err
		}
		return inContainer(doc, parents, func(c any) (any, error) { return addMember(c, key, v) })
	}
	return nil, fmt.Errorf("unexpected kind: %q", op.Op)
}

// splitPath splits a path into the tokens of the containers it goes through and its last
// token, unescaped, dropping its first token (the "" before the leading "/"). ok is false for a
// path of one token.
func splitPath(p string) (parents []string, key string, ok bool) {
	split := strings.Split(p, "/")
	if len(split) < 2 {
		return nil, "", false
	}
	for i := range split {
		split[i] = strings.ReplaceAll(strings.ReplaceAll(split[i], "~1", "/"), "~0", "~")
	}
	return split[1 : len(split)-1], split[len(split)-1], true
}

// inContainer applies f to the container (a JSON object or array) that the tokens lead to from
// doc, puts what f returns in its place, and returns doc.
func inContainer(doc any, tokens []string, f func(c any) (any, error)) (any, error) {
	if len(tokens) == 0 {
		switch doc.(type) {
		case map[string]any, []any:
			return f(doc)
		}
		return nil, fmt.Errorf("doc is missing path")
	}
	child, err := member(doc, tokens[0])
	if err != nil {
		return nil, err
	}
	switch child.(type) {
	case map[string]any, []any:
	default:
		return nil, fmt.Errorf("doc is missing path: %q is not an object or an array", tokens[0])
	}
	child, err = inContainer(child, tokens[1:], f)
	if err != nil {
		return nil, err
	}
	return setMember(doc, tokens[0], child)
}

// index reads an array index as the API server's json-patch does: an integer (leading zeros
// and signs allowed), negative ones counting from n.
func index(tok string, n int) (int, error) {
	i, err := strconv.Atoi(tok)
	if err != nil {
		return 0, fmt.Errorf("value was not a proper array index: %q", tok)
	}
	if i < 0 {
		if i < -n {
			return 0, fmt.Errorf("unable to access invalid index: %d", i)
		}
		i += n
	}
	return i, nil
}

// member returns the member or element key of c: nil for a missing member, an error for an
// index out of range.
func member(c any, key string) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		return c[key], nil
	case []any:
		i, err := index(key, len(c))
		if err != nil {
			return nil, err
		}
		if i >= len(c) {
			return nil, fmt.Errorf("unable to access invalid index: %s", key)
		}
		return c[i], nil
	}
	return nil, fmt.Errorf("doc is missing path")
}

// setMember sets the member or existing element key of c, and returns c.
func setMember(c any, key string, v any) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		c[key] = v
		return c, nil
	case []any:
		i, err := index(key, len(c))
		if err != nil {
			return nil, err
		}
		if i >= len(c) {
			return nil, fmt.Errorf("unable to access invalid index: %s", key)
		}
		c[i] = v
		return c, nil
	}
	return nil, fmt.Errorf("doc is missing path")
}

// addMember adds v to c at key: a member set, an element inserted ("-" appends), and returns c.
func addMember(c any, key string, v any) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		c[key] = v
		return c, nil
	case []any:
		if key == "-" {
			return append(c, v), nil
		}
		i, err := index(key, len(c)+1)
		if err != nil {
			return nil, err
		}
		if i > len(c) {
			return nil, fmt.Errorf("unable to access invalid index: %s", key)
		}
		return append(c[:i:i], append([]any{v}, c[i:]...)...), nil
	}
	return nil, fmt.Errorf("doc is missing path")
}

// removeMember removes the member or element key of c, and returns c.
func removeMember(c any, key string) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		if _, ok := c[key]; !ok {
			return nil, fmt.Errorf("unable to remove nonexistent key: %s", key)
		}
		delete(c, key)
		return c, nil
	case []any:
		i, err := index(key, len(c))
		if err != nil {
			return nil, err
		}
		if i >= len(c) {
			return nil, fmt.Errorf("unable to access invalid index: %s", key)
		}
		return append(c[:i:i], c[i+1:]...), nil
	}
	return nil, fmt.Errorf("doc is missing path")
}

// Server-side apply, minimal: an object's fields are paths of map keys, lists are atomic.

// fieldPaths lists the leaf paths of an applied object (maps are descended, anything else is a
// leaf; an empty map is a leaf), skipping what keep rejects, joined with NUL.
func fieldPaths(v any, prefix []string, keep func([]string) bool, out map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok || (len(m) == 0 && len(prefix) > 0) {
		if v != nil && keep(prefix) {
			out[strings.Join(prefix, "\x00")] = true
		}
		return
	}
	for k, e := range m {
		fieldPaths(e, append(prefix[:len(prefix):len(prefix)], k), keep, out)
	}
}

// applyFields merges the applied paths of cfg into live, after removing from live the paths in
// prev (applied before) that are not in cur; live is changed.
func applyFields(live, cfg map[string]any, prev, cur map[string]bool) {
	var gone []string
	for p := range prev {
		if !cur[p] {
			gone = append(gone, p)
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		removePath(live, strings.Split(p, "\x00"))
	}
	for p := range cur {
		path := strings.Split(p, "\x00")
		setPath(live, path, deepCopy(nested(cfg, path...)))
	}
}

func setPath(m map[string]any, path []string, v any) {
	for _, f := range path[:len(path)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// removePath deletes the leaf at path and the maps it leaves empty, but not the object's
// top-level fields (metadata, spec...).
func removePath(m map[string]any, path []string) { removeFrom(m, path, true) }

func removeFrom(m map[string]any, path []string, top bool) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	next, ok := m[path[0]].(map[string]any)
	if !ok {
		return
	}
	removeFrom(next, path[1:], false)
	if len(next) == 0 && !top {
		delete(m, path[0])
	}
}
