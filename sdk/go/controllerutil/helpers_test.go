package controllerutil_test

import (
	"encoding/json"
	"testing"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// obj makes an object from JSON, as the SDK's client decodes it (numbers as float64).
func obj(t *testing.T, s string) *wasmrec.Object {
	t.Helper()
	o := &wasmrec.Object{}
	if err := json.Unmarshal([]byte(s), &o.Object); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return o
}

// jsonOf is the JSON at a path of o, "absent" if there is nothing.
func jsonOf(t *testing.T, o *wasmrec.Object, fields ...string) string {
	t.Helper()
	v, ok := o.Nested(fields...)
	if !ok {
		return "absent"
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON fails the test unless got's JSON is want's (both compacted, keys sorted).
func sameJSON(t *testing.T, what, got, want string) {
	t.Helper()
	norm := func(s string) string {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if norm(got) != norm(want) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}
