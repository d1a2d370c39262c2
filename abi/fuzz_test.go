package abi_test

import (
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
)

// FuzzDecodeResult: whatever a guest hands back, decoding neither panics nor accepts an
// envelope it cannot encode again.
func FuzzDecodeResult(f *testing.F) {
	f.Add(abi.AppendResult(nil, abi.Result{}))
	f.Add(abi.AppendResult(nil, abi.Result{Requeue: true, RequeueAfter: time.Second}))
	f.Add(abi.AppendResult(nil, abi.Result{Failed: true, Terminal: true, Err: "no"}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := abi.DecodeResult(b)
		if err != nil {
			return
		}
		if r.Terminal && !r.Failed {
			t.Fatalf("accepted a terminal result without an error: %+v", r)
		}
		if r.RequeueAfter < 0 {
			t.Fatalf("accepted a negative requeueAfter: %+v", r)
		}
		if _, err := abi.DecodeResult(abi.AppendResult(nil, r)); err != nil {
			t.Fatalf("re-encoding %+v: %v", r, err)
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(abi.AppendRequest(nil, abi.Request{Namespace: "ns", Name: "n", Retries: 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := abi.DecodeRequest(b)
		if err != nil {
			return
		}
		if string(abi.AppendRequest(nil, r)[:abi.RequestHeaderSize-4]) != string(b[:abi.RequestHeaderSize-4]) {
			t.Fatalf("request %+v does not re-encode to its header", r)
		}
	})
}

// FuzzDecodeManifest: a manifest from a guest never panics the host.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"for":{"apiVersion":"v1","kind":"ConfigMap"}}`))
	f.Add([]byte(`{"for":{"apiVersion":"a/v1","kind":"A","predicates":[{"type":"Not","predicates":[{"type":"And","predicates":[{"type":"Namespace","namespaces":["x"]}]}]}]},"watches":[{"apiVersion":"v1","kind":"Secret","map":"namespace"}],"permissions":[{"group":"","resources":["secrets"],"verbs":["get"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := abi.DecodeManifest(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted a manifest that does not validate: %v", err)
		}
		_ = abi.Rules(m.Permissions)
	})
}
