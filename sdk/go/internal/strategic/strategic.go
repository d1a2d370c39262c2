package strategic

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

const (
	directive       = "$patch"
	deleteDirective = "delete"
	retainKeys      = "$retainKeys"
	deletePrefix    = "$deleteFromPrimitiveList/"
	orderPrefix     = "$setElementOrder/"
)

// TwoWay is the strategic merge patch that turns original into modified, two objects of the
// type fields describes. It is empty if they are equal.
func TwoWay(original, modified map[string]any, fields codec.PatchFields) (map[string]any, error) {
	return diffMaps(original, modified, fields, false)
}

func diffMaps(original, modified map[string]any, fields codec.PatchFields, buildRetainKeys bool) (map[string]any, error) {
	patch := map[string]any{}
	var retain []any
	for key, mv := range modified {
		if buildRetainKeys && mv != nil {
			retain = append(retain, key)
		}
		ov, ok := original[key]
		if !ok {
			patch[key] = mv
			continue
		}
		if key == directive {
			os, ok1 := ov.(string)
			ms, ok2 := mv.(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("invalid value for special key: %s", directive)
			}
			if os != ms {
				patch[key] = mv
			}
			continue
		}
		if kindOf(ov) != kindOf(mv) {
			patch[key] = mv
			continue
		}
		var err error
		switch ot := ov.(type) {
		case map[string]any:
			err = diffObjectMember(key, ot, mv.(map[string]any), patch, fields)
		case []any:
			err = diffListMember(key, ot, mv.([]any), patch, fields)
		default:
			if !jsonv.Equal(ov, mv) {
				patch[key] = mv
			}
		}
		if err != nil {
			return nil, err
		}
	}
	for key := range original {
		if _, ok := modified[key]; !ok {
			patch[key] = nil
		}
	}
	if len(retain) > 0 && (len(patch) > 0 || hasAdditionalNewField(original, modified)) {
		patch[retainKeys] = sortScalars(retain)
	}
	return patch, nil
}

// lookup is what fields says of the member key, or an error if it says nothing.
func lookup(fields codec.PatchFields, key string) (retain bool, strategy, mergeKey string, value codec.PatchFields, err error) {
	var s string
	ok := false
	if fields != nil {
		s, mergeKey, value, ok = fields.PatchField(key)
	}
	if !ok {
		return false, "", "", nil, fmt.Errorf("the member %q changed and its type has no patch metadata for it: use MergeFrom", key)
	}
	retain, strategy, err = splitStrategy(s)
	return retain, strategy, mergeKey, value, err
}

// splitStrategy reads a patchStrategy tag: retainKeys, and the one other strategy.
func splitStrategy(s string) (retain bool, strategy string, err error) {
	if s == "" {
		return false, "", nil
	}
	parts := splitComma(s)
	switch {
	case len(parts) == 1 && parts[0] == "retainKeys":
		return true, "", nil
	case len(parts) == 1:
		return false, parts[0], nil
	case len(parts) == 2 && parts[0] == "retainKeys":
		return true, parts[1], nil
	case len(parts) == 2 && parts[1] == "retainKeys":
		return true, parts[0], nil
	}
	return false, "", fmt.Errorf("unexpected patch strategy: %v", parts)
}

func splitComma(s string) []string {
	var out []string
	for {
		i := 0
		for i < len(s) && s[i] != ',' {
			i++
		}
		out = append(out, s[:i])
		if i == len(s) {
			return out
		}
		s = s[i+1:]
	}
}

func diffObjectMember(key string, o, m, patch map[string]any, fields codec.PatchFields) error {
	retain, strategy, _, value, err := lookup(fields, key)
	if err != nil {
		if jsonv.Equal(o, m) {
			return nil
		}
		return err
	}
	if strategy == "replace" {
		patch[key] = m
		return nil
	}
	p, err := diffMaps(o, m, value, retain)
	if err != nil {
		return err
	}
	if len(p) > 0 {
		patch[key] = p
	}
	return nil
}

func diffListMember(key string, o, m []any, patch map[string]any, fields codec.PatchFields) error {
	retain, strategy, mergeKey, value, err := lookup(fields, key)
	if err != nil {
		if jsonv.Equal(o, m) {
			return nil
		}
		return err
	}
	if strategy != "merge" {
		if !jsonv.Equal(o, m) {
			patch[key] = m
		}
		return nil
	}
	add, del, order, err := diffLists(o, m, value, mergeKey, retain)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if len(add) > 0 {
		patch[key] = add
	}
	if len(del) > 0 {
		patch[deletePrefix+key] = del
	}
	if len(order) > 0 {
		patch[orderPrefix+key] = order
	}
	return nil
}

// diffLists diffs two lists merged by mergeKey (of objects) or by value (of scalars): the
// patch's list, the values deleted from a list of scalars, and the new order.
func diffLists(original, modified []any, fields codec.PatchFields, mergeKey string, retain bool) (add, del, order []any, err error) {
	if len(original) == 0 {
		if len(modified) == 0 {
			return nil, nil, nil, nil
		}
		return modified, nil, nil, nil
	}
	k, err := elementKind(original, modified)
	if err != nil {
		return nil, nil, nil, err
	}
	switch k {
	case kindObject:
		add, del, err = diffListsOfObjects(original, modified, fields, mergeKey, retain)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := needKey(mergeKey, add, modified); err != nil {
			return nil, nil, nil, err
		}
		sortByOrder(add, modified, mergeKey, true)
		same, err := orderSame(original, modified, mergeKey)
		if err != nil {
			return nil, nil, nil, err
		}
		add = append(add, del...)
		if len(add) > 0 || !same {
			order = make([]any, len(modified))
			for i, v := range modified {
				order[i] = map[string]any{mergeKey: v.(map[string]any)[mergeKey]}
			}
		}
		return add, nil, order, nil
	case kindList:
		return nil, nil, nil, errors.New("lists of lists are not supported")
	}
	// Kubernetes sorts the original list in place before it compares it with the modified one,
	// so a list only out of order still has its order set.
	sortedOriginal := sortScalars(slices.Clone(original))
	add, del = diffListsOfScalars(sortedOriginal, modified)
	sortByOrder(add, modified, "", false)
	if len(del) > 0 || !jsonv.Equal(sortedOriginal, modified) {
		order = modified
	}
	return add, del, order, nil
}

// diffListsOfScalars is the values of modified that sortedOriginal lacks, and those of
// sortedOriginal that modified lacks, each once.
func diffListsOfScalars(sortedOriginal, modified []any) (add, del []any) {
	m := sortScalars(slices.Clone(modified))
	add, del = []any{}, []any{}
	i, j := 0, 0
	for i < len(sortedOriginal) || j < len(m) {
		var os, ms string
		if i < len(sortedOriginal) {
			os = text(sortedOriginal[i])
		}
		if j < len(m) {
			ms = text(m[j])
		}
		switch {
		case i < len(sortedOriginal) && j < len(m) && os == ms:
			i++
			j++
		case i >= len(sortedOriginal) || (j < len(m) && os > ms):
			add = append(add, m[j])
			j++
		default:
			del = append(del, sortedOriginal[i])
			i++
		}
	}
	return add, dedupe(del)
}

// diffListsOfObjects walks both lists sorted by their merge keys: an item in both is diffed
// (its key and what changed), an item only in modified is added whole, an item only in
// original is deleted.
func diffListsOfObjects(original, modified []any, fields codec.PatchFields, mergeKey string, retain bool) (patch, deletions []any, err error) {
	o := sortByKey(original, mergeKey)
	m := sortByKey(modified, mergeKey)
	patch = make([]any, 0, len(modified))
	deletions = make([]any, 0, len(original))
	i, j := 0, 0
	for i < len(o) || j < len(m) {
		var oe, me map[string]any
		var ov, mv any
		var os, ms string
		if i < len(o) {
			if oe, ov, err = keyed(o[i], mergeKey); err != nil {
				return nil, nil, err
			}
			os = text(ov)
		}
		if j < len(m) {
			if me, mv, err = keyed(m[j], mergeKey); err != nil {
				return nil, nil, err
			}
			ms = text(mv)
		}
		switch {
		case oe != nil && me != nil && os == ms:
			p, err := diffMaps(oe, me, fields, retain)
			if err != nil {
				return nil, nil, err
			}
			if len(p) > 0 {
				p[mergeKey] = mv
				patch = append(patch, p)
			}
			i++
			j++
		case oe == nil || (me != nil && os > ms):
			patch = append(patch, me)
			j++
		default:
			deletions = append(deletions, map[string]any{mergeKey: ov, directive: deleteDirective})
			i++
		}
	}
	return patch, deletions, nil
}

func keyed(v any, mergeKey string) (map[string]any, any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("expected a JSON object in a list merged by %q, got %s", mergeKey, jsonKind(v))
	}
	k, ok := m[mergeKey]
	if !ok {
		return nil, nil, fmt.Errorf("an item of a list merged by %q has no %q", mergeKey, mergeKey)
	}
	return m, k, nil
}

// needKey checks that every object of the lists has the merge key.
func needKey(mergeKey string, lists ...[]any) error {
	for _, l := range lists {
		for _, v := range l {
			if _, _, err := keyed(v, mergeKey); err != nil {
				return err
			}
		}
	}
	return nil
}

// orderSame reports whether two lists of objects have the same merge keys in the same order.
func orderSame(original, modified []any, mergeKey string) (bool, error) {
	if len(original) != len(modified) {
		return false, nil
	}
	for i := range modified {
		_, a, err := keyed(original[i], mergeKey)
		if err != nil {
			return false, err
		}
		_, b, err := keyed(modified[i], mergeKey)
		if err != nil {
			return false, err
		}
		if a != b {
			return false, nil
		}
	}
	return true, nil
}

// sortByOrder sorts the patch's items as they stand in order, deletions last.
func sortByOrder(items, order []any, mergeKey string, objects bool) {
	id := func(v any) any {
		if objects {
			m, _ := v.(map[string]any)
			return m[mergeKey]
		}
		return v
	}
	index := func(v any) int {
		for i, o := range order {
			if id(o) == id(v) {
				return i
			}
		}
		return -1
	}
	var keep, deletions []any
	for _, v := range items {
		if m, ok := v.(map[string]any); objects && ok && m[directive] == deleteDirective {
			deletions = append(deletions, v)
		} else {
			keep = append(keep, v)
		}
	}
	sort.SliceStable(keep, func(i, j int) bool {
		if a := index(keep[i]); a >= 0 {
			if b := index(keep[j]); b >= 0 {
				return a < b
			}
		}
		return true
	})
	copy(items, append(keep, deletions...))
}

// sortByKey is a copy of a list of objects sorted by the text of their merge keys. It and
// sortScalars sort as Kubernetes does (sort.Sort, "less" being "not greater"), so that items
// of equal keys come out in its order too.
func sortByKey(l []any, mergeKey string) []any {
	out := slices.Clone(l)
	sort.Sort(byText{out, func(v any) string {
		m, _ := v.(map[string]any)
		return text(m[mergeKey])
	}})
	return out
}

// sortScalars sorts scalars by their text, in place.
func sortScalars(s []any) []any {
	sort.Sort(byText{s, text})
	return s
}

type byText struct {
	s    []any
	text func(any) string
}

func (b byText) Len() int           { return len(b.s) }
func (b byText) Less(i, j int) bool { return b.text(b.s[i]) <= b.text(b.s[j]) }
func (b byText) Swap(i, j int)      { b.s[i], b.s[j] = b.s[j], b.s[i] }

// dedupe drops repeated values as Kubernetes does: each repeat is replaced by the last value.
func dedupe(s []any) []any {
	n := len(s) - 1
	for i := 0; i < n; i++ {
		for j := i + 1; j <= n; j++ {
			if s[i] == s[j] {
				s[j] = s[n]
				s = s[:n]
				n--
				j--
			}
		}
	}
	return s
}

// text is a scalar as Kubernetes compares merge keys and list values: as fmt's %v prints what
// its JSON decoder gives (whole numbers as int64).
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case json.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "<nil>"
	}
	return fmt.Sprint(v)
}

func hasAdditionalNewField(original, modified map[string]any) bool {
	for k, v := range original {
		if v == nil {
			continue
		}
		if _, ok := modified[k]; !ok {
			return true
		}
	}
	return false
}

type kind uint8

const (
	kindNull kind = iota
	kindString
	kindNumber
	kindBool
	kindObject
	kindList
	kindOther
)

func kindOf(v any) kind {
	switch v.(type) {
	case nil:
		return kindNull
	case string:
		return kindString
	case float64, json.Number:
		return kindNumber
	case bool:
		return kindBool
	case map[string]any:
		return kindObject
	case []any:
		return kindList
	}
	return kindOther
}

func jsonKind(v any) string {
	return [...]string{"null", "a string", "a number", "a bool", "an object", "a list", "a value"}[kindOf(v)]
}

// elementKind is the kind of every item of the lists, or an error if they differ.
func elementKind(lists ...[]any) (kind, error) {
	first := true
	var k kind
	for _, l := range lists {
		for _, v := range l {
			vk := kindOf(v)
			if vk == kindNull {
				return 0, errors.New("a list holds null")
			}
			if first {
				k, first = vk, false
			} else if vk != k {
				return 0, errors.New("list element types are not identical")
			}
		}
	}
	return k, nil
}
