package jsonv

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// checkMarshal reports how Marshal(v) differs from json.Marshal(v).
func checkMarshal(t *testing.T, name string, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := Marshal(v)
	switch {
	case wantErr != nil:
		if err == nil || err.Error() != wantErr.Error() {
			t.Errorf("%s: %s, %v; want encoding/json's error %v", name, got, err, wantErr)
		}
	case err != nil || string(got) != string(want):
		t.Errorf("%s: %s, %v; want %s", name, got, err, want)
	}
}

func TestMarshalAsEncodingJSON(t *testing.T) {
	cycle := map[string]any{}
	cycle["self"] = cycle
	deep := any(1.0)
	for range 1500 {
		deep = []any{deep}
	}
	for name, v := range map[string]any{
		"nil":            nil,
		"object":         map[string]any{"b": 1.0, "a": []any{true, false, nil, "s"}, "": map[string]any{}, "é": []any{}},
		"nil map":        map[string]any(nil),
		"nil slice":      []any(nil),
		"nested nils":    map[string]any{"m": map[string]any(nil), "s": []any(nil)},
		"escapes":        "\" \\ / \b \f \n \r \t \x00 \x1f <a href=\"x\">&amp;</a> \u2028 \u2029 é 😀 \x7f",
		"invalid UTF-8":  "a\xffb\xc3\x28\xed\xa0\x80\xf0\x9f\x98",
		"keys escaped":   map[string]any{"<k>": 1.0, "\xff": 2.0, "a\nb": 3.0, "B": 4.0, "a": 5.0},
		"floats":         []any{0.0, math.Copysign(0, -1), 1.0, -1.5, 1e20, 1e21, 123456789e13, 1e-6, 1e-7, 5e-324, math.MaxFloat64, 0.1, 1.0 / 3, 1e-9, 2.5e-10},
		"NaN":            map[string]any{"x": math.NaN()},
		"infinity":       []any{math.Inf(-1)},
		"other types":    map[string]any{"i": 3, "u": uint8(7), "ss": []string{"<a>"}, "ms": map[string]string{"k": "v"}, "n": json.Number("12"), "raw": json.RawMessage(` {"a" : "<"} `), "f32": float32(0.1)},
		"unsupported":    map[string]any{"c": make(chan int)},
		"a cycle":        cycle,
		"deep, no cycle": deep,
	} {
		checkMarshal(t, name, v)
	}
}

func FuzzMarshal(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","metadata":{"name":"a","labels":{"x":"<y>"}},"data":{"k":"v\n\u2028"},"n":[1,2.5,-1e-7,1e21]}`), "s\xff<", 1.5)
	f.Fuzz(func(t *testing.T, data []byte, s string, x float64) {
		var v any
		if json.Unmarshal(data, &v) == nil {
			checkMarshal(t, "decoded "+string(data), v)
		}
		checkMarshal(t, "string and float", map[string]any{"k": s, s: x, strings.ToUpper(s): []any{s, x}})
	})
}
