package plugintest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// normalize is v as encoding/json decodes it: maps, slices, float64, strings, bools, nil.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// match compares got with the partial want at path and says how each field differs: a map's
// keys given in want, a list item by item (as long as want's), a scalar exactly; null in want
// is a field that must be absent, and a map that wants only absences ({team: null}) is met by
// no map at all, as the API server drops an empty one.
func match(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want a map, got %s", where(path), show(got))}
		}
		var out []string
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			gv, present := g[k]
			p := join(path, k)
			switch {
			case w[k] == nil && present && gv != nil:
				out = append(out, fmt.Sprintf("%s: want it absent, got %s", p, show(gv)))
			case w[k] == nil:
			case gv == nil && onlyAbsences(w[k]):
			case !present:
				out = append(out, fmt.Sprintf("%s: want %s, got nothing", p, show(w[k])))
			default:
				out = append(out, match(w[k], gv, p)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want a list, got %s", where(path), show(got))}
		}
		if len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d items, got %d: %s", where(path), len(w), len(g), show(got))}
		}
		var out []string
		for i := range w {
			out = append(out, match(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if want != got {
		return []string{fmt.Sprintf("%s: want %s, got %s", where(path), show(want), show(got))}
	}
	return nil
}

// onlyAbsences reports whether want asks only that fields be absent: null, or a map of such.
func onlyAbsences(want any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		for _, v := range w {
			if !onlyAbsences(v) {
				return false
			}
		}
		return true
	}
	return false
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// join adds key to a path: spec.port, or metadata.annotations["example.com/x"] for a key a
// dotted path cannot hold.
func join(path, key string) string {
	if !plainKey.MatchString(key) {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "the object"
	}
	return path
}

// show is a value as JSON, cut if long.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// Match compares an object with the partial object a case expects (after:), and says how each
// field differs.
func Match(want, got map[string]any) []string { return match(normalize(want), normalize(got), "") }
