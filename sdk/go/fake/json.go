package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

// Objects are held as the JSON the plugin sent, decoded with json.Number so that integers keep
// every digit, as the API server keeps them.

// decodeJSON decodes one JSON value, keeping numbers as json.Number.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("invalid character after top-level value")
	}
	return v, nil
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

func copyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return deepCopy(m).(map[string]any)
}

// normalize makes a value of Go types (an object a test built) into decoded JSON.
func normalize(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d, err := decodeJSON(b)
	if err != nil {
		return nil, err
	}
	m, ok := d.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	return m, nil
}

// public makes a held object into what the SDK's Client would decode: float64 numbers.
func public(o map[string]any) *wasmrec.Object {
	b, _ := json.Marshal(o)
	out := &wasmrec.Object{}
	_ = json.Unmarshal(b, &out.Object)
	return out
}

func equal(a, b any) bool { return jsonv.Equal(a, b) }

// nested returns the value at a path of fields, or nil.
func nested(o map[string]any, fields ...string) any {
	var v any = o
	for _, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[f]
	}
	return v
}

// str returns the string at a path of fields, or "".
func str(o map[string]any, fields ...string) string {
	s, _ := nested(o, fields...).(string)
	return s
}

// meta returns the object's metadata, making it if need be.
func meta(o map[string]any) map[string]any {
	m, ok := o["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		o["metadata"] = m
	}
	return m
}

// setOrDelete sets m[k] to v, or deletes it if v is nil.
func setOrDelete(m map[string]any, k string, v any) {
	if v == nil {
		delete(m, k)
		return
	}
	m[k] = v
}

// stringMap returns the strings of a map at a path (labels).
func stringMap(o map[string]any, fields ...string) map[string]string {
	m, _ := nested(o, fields...).(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// int64At reads an integer at a path.
func int64At(o map[string]any, fields ...string) int64 {
	switch n := nested(o, fields...).(type) {
	case json.Number:
		i, _ := n.Int64()
		return i
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

// stringList reads a list of strings (finalizers).
func stringList(o map[string]any, fields ...string) []string {
	l, _ := nested(o, fields...).([]any)
	var out []string
	for _, v := range l {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// formatValue writes a decoded JSON value for a log line: strings bare unless they need quotes.
func formatValue(v any) string {
	if s, ok := v.(string); ok {
		if s == "" || strings.ContainsAny(s, " \t\n\"=") {
			b, _ := json.Marshal(s)
			return string(b)
		}
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
