package fake

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
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

// strategicDirective finds a strategic merge patch directive ($patch, $retainKeys,
// $setElementOrder/..., $deleteFromPrimitiveList/...), which the fake does not implement.
func strategicDirective(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.HasPrefix(k, "$") {
				return k
			}
			if d := strategicDirective(e); d != "" {
				return d
			}
		}
	case []any:
		for _, e := range v {
			if d := strategicDirective(e); d != "" {
				return d
			}
		}
	}
	return ""
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string           `json:"op"`
	Path  *string          `json:"path"`
	From  *string          `json:"from"`
	Value *json.RawMessage `json:"value"`
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
	if op.Path == nil {
		return nil, fmt.Errorf("missing path")
	}
	path, err := pointer(*op.Path)
	if err != nil {
		return nil, err
	}
	value := func() (any, error) {
		if op.Value == nil {
			return nil, fmt.Errorf("missing value")
		}
		return decodeJSON(*op.Value)
	}
	from := func() ([]string, error) {
		if op.From == nil {
			return nil, fmt.Errorf("missing from")
		}
		return pointer(*op.From)
	}
	switch op.Op {
	case "add":
		v, err := value()
		if err != nil {
			return nil, err
		}
		return pointerAdd(doc, path, v)
	case "remove":
		doc, _, err := pointerRemove(doc, path)
		return doc, err
	case "replace":
		v, err := value()
		if err != nil {
			return nil, err
		}
		if _, err := pointerGet(doc, path); err != nil {
			return nil, err
		}
		doc, _, err = pointerRemove(doc, path)
		if err != nil {
			return nil, err
		}
		return pointerAdd(doc, path, v)
	case "move", "copy":
		fp, err := from()
		if err != nil {
			return nil, err
		}
		v, err := pointerGet(doc, fp)
		if err != nil {
			return nil, err
		}
		if op.Op == "move" {
			if len(fp) < len(path) && strings.Join(path[:len(fp)], "/") == strings.Join(fp, "/") {
				return nil, fmt.Errorf("cannot move %q into its own child %q", *op.From, *op.Path)
			}
			if doc, _, err = pointerRemove(doc, fp); err != nil {
				return nil, err
			}
		} else {
			v = deepCopy(v)
		}
		return pointerAdd(doc, path, v)
	case "test":
		v, err := value()
		if err != nil {
			return nil, err
		}
		got, err := pointerGet(doc, path)
		if err != nil {
			return nil, err
		}
		if !equal(got, v) {
			return nil, fmt.Errorf("testing value %s failed: test failed", *op.Path)
		}
		return doc, nil
	}
	return nil, fmt.Errorf("unexpected operation %q", op.Op)
}

// pointer parses a JSON pointer (RFC 6901) into its unescaped tokens.
func pointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("path %q does not start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func index(tok string, n int, end bool) (int, error) {
	if end && tok == "-" {
		return n, nil
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || (len(tok) > 1 && tok[0] == '0') {
		return 0, fmt.Errorf("invalid array index %q", tok)
	}
	limit := n - 1
	if end {
		limit = n
	}
	if i > limit {
		return 0, fmt.Errorf("array index %d out of bounds (length %d)", i, n)
	}
	return i, nil
}

func pointerGet(doc any, path []string) (any, error) {
	v := doc
	for _, tok := range path {
		switch c := v.(type) {
		case map[string]any:
			e, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("path /%s does not exist", strings.Join(path, "/"))
			}
			v = e
		case []any:
			i, err := index(tok, len(c), false)
			if err != nil {
				return nil, err
			}
			v = c[i]
		default:
			return nil, fmt.Errorf("path /%s does not exist", strings.Join(path, "/"))
		}
	}
	return v, nil
}

// pointerAdd adds v at path (RFC 6902 add: a member is set, an array element inserted) and
// returns the document.
func pointerAdd(doc any, path []string, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	parent, err := pointerGet(doc, path[:len(path)-1])
	if err != nil {
		return nil, err
	}
	last := path[len(path)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
		return doc, nil
	case []any:
		i, err := index(last, len(c), true)
		if err != nil {
			return nil, err
		}
		c = append(c[:i], append([]any{v}, c[i:]...)...)
		return pointerSet(doc, path[:len(path)-1], c)
	}
	return nil, fmt.Errorf("path /%s does not exist", strings.Join(path[:len(path)-1], "/"))
}

// pointerRemove removes the value at path and returns the document and the value.
func pointerRemove(doc any, path []string) (any, any, error) {
	if len(path) == 0 {
		return nil, doc, nil
	}
	parent, err := pointerGet(doc, path[:len(path)-1])
	if err != nil {
		return nil, nil, err
	}
	last := path[len(path)-1]
	switch c := parent.(type) {
	case map[string]any:
		v, ok := c[last]
		if !ok {
			return nil, nil, fmt.Errorf("path /%s does not exist", strings.Join(path, "/"))
		}
		delete(c, last)
		return doc, v, nil
	case []any:
		i, err := index(last, len(c), false)
		if err != nil {
			return nil, nil, err
		}
		v := c[i]
		c = append(c[:i:i], c[i+1:]...)
		doc, err = pointerSet(doc, path[:len(path)-1], c)
		return doc, v, err
	}
	return nil, nil, fmt.Errorf("path /%s does not exist", strings.Join(path, "/"))
}

// pointerSet replaces the value at an existing path (a slice that grew or shrank).
func pointerSet(doc any, path []string, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	parent, err := pointerGet(doc, path[:len(path)-1])
	if err != nil {
		return nil, err
	}
	last := path[len(path)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
	case []any:
		i, err := index(last, len(c), false)
		if err != nil {
			return nil, err
		}
		c[i] = v
	}
	return doc, nil
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
