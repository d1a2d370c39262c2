package plugintest

import (
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
)

// A write with options is taken for its object, and a dry run, which stores nothing, is not
// something the case expects to find after.
func TestACaseFromARecordingReadsWriteOptions(t *testing.T) {
	call := func(fn, in string) recording.Event {
		out := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept","namespace":"demo","uid":"u"}}`
		return recording.Event{Type: recording.EventCall, Fn: fn, In: []byte(in), Status: uint32(abi.StatusOK), Out: []byte(out)}
	}
	rec := &recording.Recording{Step: &recording.Step{Kind: "reconcile", Request: &recording.Request{Namespace: "demo", Name: "web"}, Events: []recording.Event{
		call(abi.ImportCreate, `{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept","namespace":"demo"},"data":{"a":"1"}},"fieldOwner":"spec"}`),
		call(abi.ImportCreate, `{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"tried","namespace":"demo"}},"dryRun":true}`),
		call(abi.ImportPatch, `{"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"kept","type":"merge","patch":{"data":{"b":"2"}},"dryRun":true}`),
		call(abi.ImportDelete, `{"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"kept","dryRun":true}`),
	}}}
	c, _, err := FromRecording("options", rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.After) != 1 || RefOf(c.After[0]).Name != "kept" || len(c.Gone) != 0 {
		t.Fatalf("after %v, gone %v; want the created ConfigMap kept alone, nothing gone", c.After, c.Gone)
	}
	if data, _ := c.After[0]["data"].(map[string]any); len(data) != 1 || data["a"] != "1" {
		t.Errorf("kept holds %v, want its created data only (the patch was a dry run)", c.After[0])
	}
}
