package wasm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// readOnly refuses writes, as the host does during a map.
type readOnly struct{ *fakeAPI }

func (h readOnly) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	if fn != abi.ImportGet && fn != abi.ImportList {
		return abi.StatusBadRequest, []byte(fn + ": a map function may only read")
	}
	return h.fakeAPI.Call(ctx, fn, req)
}

func mapCall(data string) *wasm.Call {
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"cm"},"data":{%s}}`, data)
	return &wasm.Call{Host: readOnly{recordAPI()}, Map: &recording.MapInput{Watch: 1, Object: []byte(obj)}}
}

func mapModule(t *testing.T, opts wasm.Options) *wasm.Module {
	t.Helper()
	opts.Name = "map"
	return compile(t, engine(t), module(t, "testguests", "map-go"), opts)
}

// A Go guest's map function, made with the SDK's MapWatch, gets the object and returns the
// requests it names; its reads reach the call's host, its writes the host's refusal.
func TestMapReturnsTheGuestsRequests(t *testing.T) {
	m := mapModule(t, wasm.Options{})
	if w := m.Manifest().Watches; len(w) != 2 || w[1].Map != abi.MapFunc {
		t.Fatalf("watches = %+v, want a second one mapped by the plugin", w)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		data string
		want []abi.Request
	}{
		{`"targets":"a,other/b,/c"`, []abi.Request{{Namespace: "ns", Name: "a"}, {Namespace: "other", Name: "b"}, {Name: "c"}}},
		{`"none":""`, nil},
		{`"get":"b"`, []abi.Request{{Namespace: "ns", Name: "rv-2"}}},
		{`"get":"missing"`, []abi.Request{{Namespace: "ns", Name: "get-failed"}}},
		{`"write":"new"`, []abi.Request{{Name: fmt.Sprintf("create-status-%d", abi.StatusBadRequest)}}},
	} {
		got, err := m.Map(ctx, mapCall(tc.data))
		if err != nil {
			t.Fatalf("%s: %v", tc.data, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: mapped to %+v, want %+v", tc.data, got, tc.want)
		}
	}
	if s := m.Stats(); s.Traps != 0 || s.Discarded != 0 {
		t.Fatalf("stats %+v: want no trap and no instance thrown away", s)
	}
}

// A map function that panics or does not return fails the map, names the plugin, and the
// instance is thrown away; the next map runs on a sound one.
func TestAMapThatFailsThrowsItsInstanceAway(t *testing.T) {
	m := mapModule(t, wasm.Options{})
	for _, tc := range []struct {
		data string
		want error
		text string
	}{
		{`"panic":"now"`, wasm.ErrTrapped, "told to panic: now"},
		{`"spin":""`, wasm.ErrTimedOut, "map interrupted at its deadline"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		discarded := m.Stats().Discarded
		_, err := m.Map(ctx, mapCall(tc.data))
		cancel()
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), `plugin "map"`) || !strings.Contains(err.Error(), tc.text) || strings.Contains(err.Error(), "reconcile") {
			t.Fatalf("%s: err = %v, want %v naming the plugin and %q, and no reconcile", tc.data, err, tc.want, tc.text)
		}
		if d := m.Stats().Discarded; d != discarded+1 {
			t.Fatalf("%s: %d instances thrown away, want %d", tc.data, d, discarded+1)
		}
		got, err := m.Map(context.Background(), mapCall(`"targets":"after"`))
		if err != nil || len(got) != 1 || got[0].Name != "after" {
			t.Fatalf("%s: the map after it: %+v, %v", tc.data, got, err)
		}
	}
}

// A module whose manifest maps a watch by a function it does not export is refused at load,
// with what to do.
func TestAManifestMappingByAMissingExportIsRefused(t *testing.T) {
	_, err := engine(t).Compile(context.Background(), module(t, "testguests", "mapnoexport"), wasm.Options{Name: "mapnoexport"})
	if err == nil || !strings.Contains(err.Error(), abi.ExportMap) || !strings.Contains(err.Error(), `"func"`) {
		t.Fatalf("err = %v, want a refusal naming %s and the map", err, abi.ExportMap)
	}
}

// Maps are steps of their instance: a reconcile recorded after them replays exactly only with
// them, since the guest keeps what they did in its heap.
func TestAReplayRunsTheMapsBeforeIt(t *testing.T) {
	e := engine(t)
	b := module(t, "testguests", "map-go")
	m := compile(t, e, b, wasm.Options{Name: "map", Record: true})
	ctx := context.Background()
	var maps []*wasm.Call
	for _, data := range []string{`"targets":"a"`, `"get":"a"`, `"targets":"b,c"`} {
		c := mapCall(data)
		if _, err := m.Map(ctx, c); err != nil {
			t.Fatal(err)
		}
		if c.Step == nil || c.Step.Kind != recording.StepMap || c.Step.Map == nil || c.Step.Outcome != recording.Returned {
			t.Fatalf("%s: recorded step %+v, want a map that returned", data, c.Step)
		}
		maps = append(maps, c)
	}
	if got := maps[1].Step.Describe(); got != "mapped to 1 requests" {
		t.Errorf("a map step says %q", got)
	}
	rec := &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "report"}, Host: recordAPI()}
	res, err := m.Reconcile(ctx, rec)
	if err != nil || !strings.Contains(res.Err, "3 objects mapped") {
		t.Fatalf("reconcile: %+v, %v; want it to report 3 maps", res, err)
	}
	if n := slices.IndexFunc(rec.Before, func(s *recording.Step) bool { return s.Kind == recording.StepMap }); n < 0 {
		t.Fatalf("the reconcile's steps before it are %s: no map", kinds(rec.Before))
	}
	if err := replay(t, e, b, rec.Before, rec.Step); err != nil {
		t.Fatalf("replaying the reconcile after its maps: %v", err)
	}
	var withoutMaps []*recording.Step
	for _, s := range rec.Before {
		if s.Kind != recording.StepMap {
			withoutMaps = append(withoutMaps, s)
		}
	}
	var d *wasm.Difference
	if err := replay(t, e, b, withoutMaps, rec.Step); !errors.As(err, &d) {
		t.Fatalf("replaying without its maps: %v, want a difference", err)
	}
	// A map replays too, from its step's input: the same get, the same requests.
	if err := replay(t, e, b, maps[1].Before, maps[1].Step); err != nil {
		t.Fatalf("replaying a map: %v", err)
	}
}

// The C SDK's map function: what wasmrec_map_add adds (a request without a name left out)
// reaches the host as the requests.
func TestACMapFunction(t *testing.T) {
	m := compile(t, engine(t), module(t, "testguests", "mapc"), wasm.Options{Name: "mapc"})
	got, err := m.Map(context.Background(), &wasm.Call{Map: &recording.MapInput{Watch: 0, Object: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"team-a","name":"settings"}}`)}})
	want := []abi.Request{{Namespace: "team-a", Name: "settings"}, {Name: "all"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("mapped to %+v, %v; want %+v", got, err, want)
	}
	if _, err := m.Map(context.Background(), &wasm.Call{Map: &recording.MapInput{Watch: 1, Object: []byte(`{}`)}}); !errors.Is(err, wasm.ErrTrapped) {
		t.Fatalf("a watch the plugin does not map: %v, want its trap", err)
	}
}

// BenchmarkMap is one map of a ConfigMap through the Go SDK's MapWatch: an instance from the
// pool, the object decoded as a *wasmrec.Object, one request back.
func BenchmarkMap(b *testing.B) {
	m := compile(b, engine(b), module(b, "testguests", "map-go"), wasm.Options{Name: "map"})
	c := mapCall(`"targets":"a","settings.yaml":"` + strings.Repeat("x", 400) + `"`)
	c.Map.Object = []byte(strings.Replace(string(c.Map.Object), `"name":"cm"`, `"name":"cm","uid":"0e1d8a2b-5f1c-4c3e-9a57-1f2d3c4b5a69","resourceVersion":"123456","creationTimestamp":"2026-11-29T12:00:00Z","labels":{"app":"web","tier":"frontend"}`, 1))
	ctx := context.Background()
	for b.Loop() {
		if _, err := m.Map(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// A C plugin whose manifest maps by func without defining wasmrec_plugin_map is refused at
// load with the SDK's words, not left to trap at every event.
func TestACPluginWithoutItsMapFunctionIsRefused(t *testing.T) {
	_, err := engine(t).Compile(context.Background(), module(t, "testguests", "mapc-nomap"), wasm.Options{Name: "mapc"})
	if err == nil || !strings.Contains(err.Error(), "defines no wasmrec_plugin_map") {
		t.Fatalf("err = %v, want the SDK's refusal", err)
	}
}
