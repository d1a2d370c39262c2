package wasm

import (
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
)

// A replay takes a list that differs from the recorded one only in the index values the guest
// tells (which follow what its instance computed before) as the same list; any other difference
// is a different list, and a get is compared byte for byte.
func TestAListIsTheSameWhateverIndexValuesItTells(t *testing.T) {
	call := func(fn, in string) *recording.Event {
		return &recording.Event{Type: recording.EventCall, Fn: fn, In: []byte(in)}
	}
	const recorded = `{"apiVersion":"batch/v1","kind":"Job","namespace":"demo","fields":{"owner":"a"},"indexed":[{"uid":"u1","resourceVersion":"1","field":"owner","values":["b"]}]}`
	for _, c := range []struct {
		in   string
		same bool
	}{
		{recorded, true},
		{`{"apiVersion":"batch/v1","kind":"Job","namespace":"demo","fields":{"owner":"a"}}`, true},
		{`{"apiVersion":"batch/v1","kind":"Job","namespace":"demo","fields":{"owner":"a"},"indexed":[{"uid":"u2","resourceVersion":"3","field":"owner","values":["a"]}]}`, true},
		{`{"apiVersion":"batch/v1","kind":"Job","namespace":"demo","fields":{"owner":"b"}}`, false},
		{`{"apiVersion":"batch/v1","kind":"Job","namespace":"other","fields":{"owner":"a"}}`, false},
		{`{"apiVersion":"batch/v1","kind":"Job","namespace":"demo"}`, false},
		{`not json`, false},
	} {
		if got := sameRequest(call(abi.ImportList, recorded), call(abi.ImportList, c.in)); got != c.same {
			t.Errorf("list %s: same %v, want %v", c.in, got, c.same)
		}
	}
	if sameRequest(call(abi.ImportGet, `{"apiVersion":"v1","kind":"ConfigMap","name":"a"}`), call(abi.ImportGet, `{"kind":"ConfigMap","apiVersion":"v1","name":"a"}`)) {
		t.Error("a get with other bytes was taken as the same")
	}
}
