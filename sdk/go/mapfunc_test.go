package wasmrec

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
)

// withManifest makes m the registered manifest for the test, and forgets its map functions
// after it.
func withManifest(t *testing.T, m Manifest) {
	t.Helper()
	saved := registered
	t.Cleanup(func() { registered = saved })
	registered.m = m
}

// A MapWatch's function gets the watched object and its requests go to the host as request
// envelopes, in order; a request without a name is left out, with a line saying so.
func TestMapWatchEncodesItsRequests(t *testing.T) {
	saved := registered
	t.Cleanup(func() { registered = saved })
	var gotName string
	w := MapWatch("v1", "ConfigMap", func(_ context.Context, o *Object) []Request {
		gotName = o.Name()
		return []Request{NewRequest(o.Namespace(), "a"), NewRequest("", "cluster-scoped"), NewRequest("ns", "")}
	})
	if w.Map != abi.MapFunc || w.APIVersion != "v1" || w.Kind != "ConfigMap" {
		t.Fatalf("MapWatch = %+v", w)
	}
	m := Manifest{For: Watch{APIVersion: "example.com/v1", Kind: "Widget"}, Watches: []Watch{{APIVersion: "v1", Kind: "Secret", Map: MapSameName}, w}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := checkMaps(m); err != nil {
		t.Fatal(err)
	}
	registered.m = m
	var logged []byte
	restore := SetLogTransport(logTransport(func(_ int32, line []byte) { logged = append(logged, line...) }))
	defer restore()
	b := mapObject(nil, 1, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"team-a","name":"cm"}}`))
	got, err := abi.DecodeRequests(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []abi.Request{{Namespace: "team-a", Name: "a"}, {Name: "cluster-scoped"}}
	if gotName != "cm" || !slices.Equal(got, want) {
		t.Fatalf("map of cm (seen as %q) = %+v, want %+v", gotName, got, want)
	}
	if !strings.Contains(string(logged), "without a name") {
		t.Errorf("logged %q, want a line about the request without a name", logged)
	}
	// An object the function cannot read enqueues nothing, and says why.
	logged = nil
	if b := mapObject(b, 1, []byte(`not json`)); len(b) != 0 {
		t.Errorf("a map of bad JSON returned %d bytes", len(b))
	}
	if !strings.Contains(string(logged), "could not read the object") {
		t.Errorf("logged %q, want a line saying the object could not be read", logged)
	}
}

// A watch whose map is a function needs one: Register's check names it and says how.
func TestAMapByFuncWithoutAFunctionIsRefused(t *testing.T) {
	withManifest(t, Manifest{})
	registered.maps = nil
	m := Manifest{For: Watch{APIVersion: "v1", Kind: "Namespace"}, Watches: []Watch{{APIVersion: "v1", Kind: "ConfigMap", Map: MapByFunc}}}
	err := checkMaps(m)
	if err == nil || !strings.Contains(err.Error(), "watches[0] (v1 ConfigMap)") || !strings.Contains(err.Error(), "MapWatch") {
		t.Fatalf("err = %v, want it to name the watch and MapWatch", err)
	}
}

// logTransport takes log lines; calls fail.
type logTransport func(level int32, line []byte)

func (f logTransport) Call(_ context.Context, fn string, _ []byte) (abi.Status, []byte) {
	return abi.StatusInternal, []byte(fn + ": no host in this test")
}

func (f logTransport) Log(level int32, line []byte) { f(level, line) }

// Two watches of one kind mapped by functions would share the later one: refused, naming both.
func TestTwoMapWatchesOfOneKindAreRefused(t *testing.T) {
	withManifest(t, Manifest{})
	noop := func(context.Context, *Object) []Request { return nil }
	m := Manifest{For: Watch{APIVersion: "v1", Kind: "Secret"}, Watches: []Watch{MapWatch("v1", "ConfigMap", noop), MapWatch("v1", "ConfigMap", noop)}}
	if err := checkMaps(m); err == nil || !strings.Contains(err.Error(), "watches[0] and watches[1] both map v1 ConfigMap") {
		t.Fatalf("err = %v, want both watches named", err)
	}
}
