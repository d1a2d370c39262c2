package abi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
)

func TestResultRoundTrip(t *testing.T) {
	for _, r := range []abi.Result{
		{},
		{Requeue: true},
		{RequeueAfter: 90 * time.Second},
		{Failed: true, Err: "boom"},
		{Failed: true, Terminal: true, Err: "invalid spec: size < 0"},
		{Requeue: true, RequeueAfter: time.Millisecond, Failed: true, Err: "ünïcode"},
	} {
		got, err := abi.DecodeResult(abi.AppendResult(nil, r))
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if got != r {
			t.Fatalf("round trip: got %+v, want %+v", got, r)
		}
	}
}

func TestDecodeResultRefusesMalformed(t *testing.T) {
	valid := abi.AppendResult(nil, abi.Result{Failed: true, Err: "x"})
	patch := func(off int, b ...byte) []byte {
		c := bytes.Clone(valid)
		copy(c[off:], b)
		return c
	}
	for name, b := range map[string][]byte{
		"empty":                  nil,
		"short header":           valid[:15],
		"unknown flag":           patch(0, 0x0a),
		"terminal without error": append([]byte{4, 0, 0, 0}, make([]byte, 12)...),
		"length too long":        patch(4, 9),
		"length too short":       append(bytes.Clone(valid), 'y'),
		"negative requeueAfter":  patch(8, 0, 0, 0, 0, 0, 0, 0, 0x80),
		"message without error":  append([]byte{0, 0, 0, 0, 1, 0, 0, 0}, 0, 0, 0, 0, 0, 0, 0, 0, 'x'),
	} {
		if _, err := abi.DecodeResult(b); !errors.Is(err, abi.ErrMalformedResult) {
			t.Errorf("%s: err = %v, want ErrMalformedResult", name, err)
		}
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range []abi.Request{{Name: "cluster-scoped"}, {Namespace: "ns", Name: "n", Retries: 7}, {Namespace: "ns", Name: "quiet", DropsDebug: true}} {
		got, err := abi.DecodeRequest(abi.AppendRequest(nil, r))
		if err != nil || got != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, got, err)
		}
	}
}

func TestMapResultsRoundTrip(t *testing.T) {
	want := []abi.Request{{Name: "cluster-scoped"}, {Namespace: "ns", Name: "n"}, {Namespace: "ns", Name: "ünï"}}
	var b []byte
	for _, r := range want {
		b = abi.AppendRequest(b, r)
	}
	got, err := abi.DecodeRequests(b)
	if err != nil || len(got) != len(want) {
		t.Fatalf("DecodeRequests = %+v, %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got, err := abi.DecodeRequests(nil); err != nil || len(got) != 0 {
		t.Errorf("DecodeRequests(nil) = %+v, %v; want none", got, err)
	}
}

func TestDecodeRequestsRefusesMalformed(t *testing.T) {
	one := abi.AppendRequest(nil, abi.Request{Namespace: "ns", Name: "n"})
	patch := func(off int, b ...byte) []byte {
		c := bytes.Clone(one)
		copy(c[off:], b)
		return c
	}
	for name, b := range map[string][]byte{
		"short header":     one[:15],
		"a trailing byte":  append(bytes.Clone(one), 0),
		"name too long":    patch(4, 9),
		"empty name":       abi.AppendRequest(nil, abi.Request{Namespace: "ns"}),
		"retries":          patch(8, 1),
		"reserved":         patch(12, 1),
		"second truncated": append(bytes.Clone(one), one[:20]...),
		"too large":        make([]byte, abi.MaxMapResult+1),
	} {
		if _, err := abi.DecodeRequests(b); !errors.Is(err, abi.ErrMalformedRequests) {
			t.Errorf("%s: err = %v, want ErrMalformedRequests", name, err)
		}
	}
}

func TestDecodeManifest(t *testing.T) {
	m, err := abi.DecodeManifest([]byte(`{
		"name": "app",
		"for": {"apiVersion": "demo.wasmrec.dev/v1", "kind": "App", "predicates": [{"type": "GenerationChanged"}]},
		"owns": [{"apiVersion": "v1", "kind": "ConfigMap"}],
		"watches": [{"apiVersion": "v1", "kind": "Secret", "map": "namespace",
			"predicates": [{"type": "Or", "predicates": [{"type": "LabelSelector", "selector": {"matchLabels": {"a": "b"}}}, {"type": "Namespace", "namespaces": ["x"]}]}]}],
		"permissions": [{"group": "", "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create"]}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.For.Kind != "App" || len(m.Owns) != 1 || m.Watches[0].Map != abi.MapNamespace {
		t.Fatalf("decoded %+v", m)
	}
}

func TestDecodeManifestErrorsNameTheField(t *testing.T) {
	for manifest, want := range map[string]string{
		`{}`: "for: apiVersion and kind are required",
		`{"for": {"apiVersion": "v1", "kind": "A"}, "watches": [{"apiVersion": "v1", "kind": "B"}]}`:                              "watches[0]: map must be",
		`{"for": {"apiVersion": "v1", "kind": "A"}, "watches": [{"apiVersion": "v1", "kind": "B", "map": "lambda"}]}`:             `map must be "sameName", "namespace" or "func", not "lambda"`,
		`{"for": {"apiVersion": "v1", "kind": "A", "map": "sameName"}}`:                                                           "for: map applies to watches only",
		`{"for": {"apiVersion": "v1", "kind": "A", "predicates": [{"type": "Sometimes"}]}}`:                                       `unknown predicate type "Sometimes"`,
		`{"for": {"apiVersion": "v1", "kind": "A", "predicates": [{"type": "Not", "predicates": []}]}}`:                           "Not takes exactly one predicate",
		`{"for": {"apiVersion": "v1", "kind": "A"}, "permissions": [{"group": "", "resources": ["pods"], "verbs": ["destroy"]}]}`: `unknown verb "destroy"`,
		`{"for": {"apiVersion": "v1", "kind": "A"}, "surprise": 1}`:                                                               `unknown field "surprise"`,
		`not json`: "not valid JSON",
	} {
		_, err := abi.DecodeManifest([]byte(manifest))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", manifest, err, want)
		}
	}
}

func TestMissingPermissions(t *testing.T) {
	granted := []abi.Permission{
		{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{Group: "apps", Resources: []string{"*"}, Verbs: []string{"get"}},
	}
	requested := []abi.Permission{
		{Group: "", Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "delete"}},
		{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}},
	}
	var got []string
	for _, r := range abi.Missing(granted, requested) {
		got = append(got, r.String())
	}
	want := "delete core/configmaps, delete core/secrets, get core/secrets, patch apps/deployments"
	if strings.Join(got, ", ") != want {
		t.Fatalf("missing = %q, want %q", strings.Join(got, ", "), want)
	}
}

func TestPackUnpack(t *testing.T) {
	if p, n := abi.UnpackPtrLen(abi.PackPtrLen(0xfffffff0, 17)); p != 0xfffffff0 || n != 17 {
		t.Fatal("ptr/len round trip")
	}
	if s, n := abi.UnpackStatusLen(abi.PackStatusLen(abi.StatusConflict, 5)); s != abi.StatusConflict || n != 5 {
		t.Fatal("status/len round trip")
	}
}

func TestAWriteRequestSplitsIntoWhatWasWrapped(t *testing.T) {
	obj := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"object":{"dryRun":true}}`)
	for _, o := range []abi.WriteOptions{{}, {DryRun: true}, {FieldOwner: "status \"writer\" é"}, {FieldOwner: "a", DryRun: true}} {
		req := o.Wrap(obj)
		if !json.Valid(req) {
			t.Fatalf("%+v: the request %s is not JSON", o, req)
		}
		got, opts, err := abi.SplitWrite(req)
		if err != nil || opts != o || !bytes.Equal(got, obj) {
			t.Errorf("%+v: SplitWrite(%s) = %s, %+v, %v; want the object and the options back", o, req, got, opts, err)
		}
	}
	if _, _, err := abi.SplitWrite([]byte(`{"object": 1`)); err == nil {
		t.Error("SplitWrite took JSON cut short")
	}
}

func TestAFieldManagerAlwaysHoldsThePluginsName(t *testing.T) {
	for _, tc := range []struct{ owner, want, err string }{
		{"", "web", ""},
		{"status", "web/status", ""},
		{"kube-controller-manager", "web/kube-controller-manager", ""},
		{"new\nline", "", `fieldOwner "new\nline": use printable characters only`},
		{strings.Repeat("o", 124), "web/" + strings.Repeat("o", 124), ""},
		{strings.Repeat("o", 125), "", `fieldOwner "oooooooooooooooooooooooooooooooooooooooo"...: with the plugin's name "web" the field manager would be 129 bytes, over the API server's 128: use a shorter owner`},
		{" ", "", `fieldOwner " " is blank: name the writer, or leave the owner out`},
	} {
		got, err := abi.FieldManager("web", tc.owner)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("FieldManager(web, %q) = %q, %v; want %q, %q", tc.owner, got, err, tc.want, tc.err)
		}
	}
}

func TestAPatchMayNotWriteManagedFields(t *testing.T) {
	for _, tc := range []struct {
		typ, patch string
		sets       bool
	}{
		{abi.PatchMerge, `{"metadata":{"labels":{"a":"b"}}}`, false},
		{abi.PatchMerge, `{"metadata":{"managedFields":[{"manager":"kubectl"}]}}`, true},
		{abi.PatchStrategic, `{"metadata":{"managedFields":null}}`, true},
		{abi.PatchMerge, `{"data":{"managedFields":"a key of the data"}}`, false},
		{abi.PatchJSON, `[{"op":"replace","path":"/metadata/managedFields","value":[]}]`, true},
		{abi.PatchJSON, `[{"op":"remove","path":"/metadata/managedFields/0"}]`, true},
		{abi.PatchJSON, `[{"op":"replace","path":"/metadata","value":{"name":"x","managedFields":[]}}]`, true},
		{abi.PatchJSON, `[{"op":"replace","path":"","value":{"metadata":{"managedFields":[]}}}]`, true},
		{abi.PatchJSON, `[{"op":"add","path":"/data/managedFields","value":"x"}]`, false},
		{abi.PatchApply, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","managedFields":[]}}`, true},
	} {
		if got := abi.PatchSetsManagedFields(tc.typ, []byte(tc.patch)); got != tc.sets {
			t.Errorf("PatchSetsManagedFields(%s, %s) = %v, want %v", tc.typ, tc.patch, got, tc.sets)
		}
	}
}
