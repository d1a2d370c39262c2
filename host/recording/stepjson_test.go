package recording

import (
	"bytes"
	"encoding/json"
	"testing"
)

// A step's JSON is encoding/json's, byte for byte: what a recording's chain was computed over
// before, and what any JSON reader reads.
func FuzzStepJSON(f *testing.F) {
	f.Add("reconcile", "ns", "name", uint32(0), "call", "get", []byte(`{"a":1}`), []byte("out"), uint32(0), int64(0), []byte(nil), "returned", "")
	f.Add("initialize", "", "", uint32(3), "monotime", "", []byte(nil), []byte(nil), uint32(4), int64(-7), []byte("r"), "trapped", "<bad> & \"quoted\"\n\u2028é\xff")
	f.Fuzz(func(t *testing.T, kind, ns, name string, retries uint32, typ, fn string, in, out []byte, status uint32, n int64, result []byte, outcome, errText string) {
		for _, s := range []*Step{
			{Kind: kind, Outcome: outcome},
			{Kind: kind, Request: &Request{Namespace: ns, Name: name, Retries: retries}, Events: []Event{{Type: typ, Fn: fn, In: in, Out: out, Status: status, N: n}, {Type: typ}}, Result: result, Outcome: outcome, Error: errText},
			{Kind: kind, Events: []Event{}, Outcome: outcome},
			{Kind: kind, Map: &MapInput{Watch: retries, Object: in}, Result: result, Outcome: outcome},
		} {
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.appendJSON(nil); !bytes.Equal(got, want) {
				t.Fatalf("appendJSON:\n%s\nencoding/json:\n%s", got, want)
			}
		}
	})
}
