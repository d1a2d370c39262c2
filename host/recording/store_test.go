package recording

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func step(kind string, payload string) *Step {
	s := &Step{Kind: kind, Outcome: Returned}
	s.Add(Event{Type: EventCall, Fn: "get", In: []byte(payload), Out: bytes.Repeat([]byte(payload), 50)})
	return s
}

func recordingOf(instance, name string) *Recording {
	return &Recording{Format: Format, Plugin: "p", Module: "sha256:00", Time: time.Now(), Instance: instance,
		Step: &Step{Kind: StepReconcile, Request: &Request{Namespace: "ns", Name: name}, Outcome: Returned}}
}

// Recordings are written with the steps before them, each step once per instance, and read
// back the same; a step changed on disk is found.
func TestStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 0, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	lineage := []*Step{step(StepInitialize, "init"), step(StepManifest, "manifest"), step(StepReconcile, "a"), step(StepReconcile, "b")}
	s.KeepModule([]byte("\x00asm module bytes"))
	s.Put(recordingOf("one", "a"), lineage[:2])
	s.Put(recordingOf("one", "c"), lineage[:4])
	s.Put(recordingOf("two", "a"), lineage[:1])
	s.Close()

	listed := s.List()
	if len(listed) != 3 {
		t.Fatalf("%d recordings listed, want 3", len(listed))
	}
	if steps, _ := filepath.Glob(filepath.Join(dir, "i-one", "step-*")); len(steps) != 4 {
		t.Fatalf("instance one has %d step files, want 4: each once", len(steps))
	}
	for _, l := range listed {
		rec, before, err := Load(dir, l.Digest[:20])
		if err != nil {
			t.Fatal(err)
		}
		if len(before) != rec.Before || before[0].Kind != StepInitialize || string(before[0].Events[0].In) != "init" {
			t.Fatalf("recording of %s: %d steps before it came back, the first %+v", rec.Step.Request.Name, len(before), before[0])
		}
	}
	if b, err := LoadModule(dir, digestOf([]byte("\x00asm module bytes"))); err != nil || string(b) != "\x00asm module bytes" {
		t.Fatalf("the module came back as %q, %v", b, err)
	}

	// A step replaced by another: the chain does not match.
	other, _ := os.ReadFile(filepath.Join(dir, "i-one", "step-2"+fileSuffix))
	must(t, os.WriteFile(filepath.Join(dir, "i-one", "step-1"+fileSuffix), other, 0o600))
	for _, l := range listed {
		rec, _, err := Load(dir, l.Digest)
		if rec == nil && (err == nil || !strings.Contains(err.Error(), "are not those it was recorded after")) {
			t.Fatalf("loading with a step changed: %v", err)
		}
	}
}

// A store stays within its bound, dropping whole instances, the least recently written
// first, and again after a restart with a smaller bound; what is kept loads whole.
func TestStoreBound(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 8<<10, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		inst := fmt.Sprint("inst", i/4)
		s.Put(recordingOf(inst, fmt.Sprint(i)), []*Step{step(StepInitialize, fmt.Sprintf("init %s %s", inst, strings.Repeat("x", i*37)))})
		s.Flush() // one at a time: Put never waits, and drops what its queue has no room for
	}
	s.Close()
	if b := s.Bytes(); b > 8<<10 {
		t.Fatalf("the store holds %d bytes, more than its bound", b)
	}
	names := loadAll(t, dir)
	if len(names) == 0 || len(names) >= 40 || !names["39"] || names["0"] {
		t.Fatalf("kept %v of 40; want the newest, not the oldest", names)
	}

	s2, err := Open(dir, 2<<10, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if b := s2.Bytes(); b > 2<<10 && len(loadAll(t, dir)) > 4 {
		t.Fatalf("reopened with a smaller bound, the store holds %d bytes in more than one instance", b)
	}
	if kept := loadAll(t, dir); !kept["39"] {
		t.Fatalf("after the restart, kept %v; want the newest instance's", kept)
	}
}

// loadAll loads every recording in dir, and returns the names they reconciled.
func loadAll(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	listed, err := List(dir)
	must(t, err)
	for _, l := range listed {
		rec, _, err := Load(dir, l.Digest)
		must(t, err)
		names[rec.Step.Request.Name] = true
	}
	return names
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Policies: what each mode keeps, and what is refused.
func TestPolicy(t *testing.T) {
	if (Policy{Mode: ModeFailures}).Keep(false) || !(Policy{Mode: ModeFailures}).Keep(true) || !(Policy{Mode: ModeAll}).Keep(false) || (Policy{}).Keep(true) {
		t.Fatal("a mode keeps what it should not, or not what it should")
	}
	kept := 0
	for range 10000 {
		if (Policy{Mode: ModeSample, Sample: 0.1}).Keep(false) {
			kept++
		}
	}
	if kept < 800 || kept > 1200 {
		t.Fatalf("a 0.1 sample kept %d of 10000", kept)
	}
	for _, p := range []Policy{{Mode: "everything"}, {Mode: ModeSample}, {Mode: ModeSample, Sample: 2}, {Mode: ModeAll, Sample: 0.5}, {Mode: ModeAll, MaxBytes: -1}} {
		if err := p.Check("record"); err == nil || !strings.HasPrefix(err.Error(), "record.") {
			t.Errorf("%+v: %v; want an error naming the field", p, err)
		}
	}
}

// A file that is not a recording of this format is refused.
func TestDecodeRefuses(t *testing.T) {
	for _, b := range []string{`{"format":"other/v9","step":{"kind":"reconcile","events":[],"outcome":"returned"}}`, `{"format":"` + Format + `"}`, `{"format":"` + Format + `","extra":1}`} {
		if _, err := DecodeRecording([]byte(b)); err == nil {
			t.Errorf("%s: decoded", b)
		}
	}
}
