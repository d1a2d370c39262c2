package wasm

import (
	"reflect"
	"testing"
)

func TestSplitLog(t *testing.T) {
	for _, tc := range []struct {
		in  string
		msg string
		kv  []any
	}{
		{"plain", "plain", nil},
		{"labeled\x00[\"configmap\",\"team-a/cm1\",\"n\",3]", "labeled", []any{"configmap", "team-a/cm1", "n", int64(3)}},
		{"clash\x00[\"plugin\",\"x\",\"request\",\"y\"]", "clash", []any{"plugin.plugin", "x", "plugin.request", "y"}},
		{"odd\x00[\"k\"]", "odd", []any{"k", "(MISSING)"}},
		{"not json\x00{oops", "not json {oops", nil},
		{"two docs\x00[] []", "two docs [] []", nil},
		{"object\x00[\"job\",{\"metadata\":{\"name\":\"j\"}},\"ids\",[1,2],\"ok\",true,\"none\",null,\"f\",1.5,7,\"number key\"]", "object",
			[]any{"job", jsonValue(`{"metadata":{"name":"j"}}`), "ids", jsonValue(`[1,2]`), "ok", true, "none", nil, "f", 1.5, "7", "number key"}},
	} {
		msg, kv := splitLog([]byte(tc.in))
		if msg != tc.msg || !reflect.DeepEqual(kv, tc.kv) {
			t.Errorf("splitLog(%q) = %q, %#v; want %q, %#v", tc.in, msg, kv, tc.msg, tc.kv)
		}
	}
}
