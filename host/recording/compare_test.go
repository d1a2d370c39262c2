package recording

import (
	"slices"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
)

// A write's object is compared whether or not it came with options, and options that differ
// are a difference of their own.
func TestCompareReadsWriteOptions(t *testing.T) {
	step := func(ins ...string) *Step {
		s := &Step{Kind: "reconcile", Outcome: "ok"}
		fns := []string{abi.ImportUpdate, abi.ImportPatch}
		for i, in := range ins {
			s.Add(Event{Type: EventCall, Fn: fns[i], In: []byte(in)})
		}
		return s
	}
	const (
		plain   = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"},"data":{"a":"1"}}`
		owned   = `{"object":` + plain + `,"fieldOwner":"spec"}`
		changed = `{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"},"data":{"a":"2"}},"fieldOwner":"spec"}`
		patch   = `{"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"x","type":"merge","patch":{"data":{"b":"1"}}}`
		dry     = `{"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"x","type":"merge","patch":{"data":{"b":"1"}},"dryRun":true}`
	)
	for _, tc := range []struct {
		want, got *Step
		diff      []string
	}{
		{step(owned, patch), step(owned, patch), nil},
		{step(plain, patch), step(owned, patch), []string{`update v1 ConfigMap demo/x: write options: recorded none, made fieldOwner "spec"`}},
		{step(owned, patch), step(changed, dry), []string{`update v1 ConfigMap demo/x: data.a: "1" -> "2"`, `patch v1 ConfigMap demo/x: write options: recorded none, made dryRun`}},
	} {
		if got := Compare(tc.want, tc.got); !slices.Equal(got, tc.diff) {
			t.Errorf("Compare = %q, want %q", got, tc.diff)
		}
	}
}
