package recording

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
)

func step(kind string, payload string) *Step {
	s := &Step{Kind: kind, Outcome: Returned}
	s.Add(Event{Type: EventCall, Fn: "get", In: []byte(payload), Out: bytes.Repeat([]byte(payload), 50)})
	return s
}

var testModule = []byte("\x00asm module bytes")

func recordingOf(instance, name string) *Recording {
	st := step(StepReconcile, name)
	st.Request = &Request{Namespace: "ns", Name: name}
	return &Recording{Format: Format, Plugin: "p", Module: digestOf(testModule), Time: time.Now(), Instance: instance, Step: st}
}

// Recordings are written with the steps before them, each step once per instance, and read
// back the same; a step changed on disk is found.
func TestStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 0, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	lineage := []*Step{step(StepInitialize, "init"), step(StepManifest, "manifest")}
	s.KeepModule(digestOf(testModule), testModule)
	a := recordingOf("1", "a")
	s.Put(a, lineage)
	lineage = append(lineage, a.Step)
	lineage = append(lineage, step(StepReconcile, "b")) // not kept
	s.Put(recordingOf("1", "c"), lineage)
	s.Put(recordingOf("2", "a"), lineage[:1])
	s.Close()

	if s.Put(recordingOf("1", "late"), lineage) || s.Dropped() != 1 {
		t.Fatal("a recording Put after Close was taken, or not counted as dropped")
	}
	s.Close() // twice: nothing more

	listed := s.List()
	if len(listed) != 3 {
		t.Fatalf("%d recordings listed, want 3", len(listed))
	}
	if frames, _ := readDocs(filepath.Join(dir, "i-1", stepsLog), -1); len(frames) != 5 {
		t.Fatalf("instance 1's log holds %d steps, want 5: each once", len(frames))
	}
	for _, l := range listed {
		rec, before, err := Load(dir, l.Digest[:20])
		if err != nil {
			t.Fatal(err)
		}
		if len(before) != rec.Before || before[0].Kind != StepInitialize || string(before[0].Events[0].In) != "init" || string(rec.Step.Events[0].In) != rec.Request.Name {
			t.Fatalf("recording of %s: %d steps before it came back, the first %+v, and the reconcile %+v", rec.Request.Name, len(before), before[0], rec.Step)
		}
	}
	if b, err := LoadModule(dir, digestOf([]byte("\x00asm module bytes"))); err != nil || string(b) != "\x00asm module bytes" {
		t.Fatalf("the module came back as %q, %v", b, err)
	}

	// Bundles of recordings, read into one directory, replay from there, as from the store;
	// a bundle read twice adds nothing.
	other := t.TempDir()
	for _, i := range []int{1, 0, 2, 1} {
		var buf bytes.Buffer
		must(t, WriteBundle(&buf, dir, listed[i].Digest))
		must(t, ReadBundle(&buf, other, 1<<20))
	}
	if got, _ := List(other); len(got) != 3 {
		t.Fatalf("the bundles of 3 recordings, one twice, read into a directory: %d recordings there", len(got))
	}
	for _, l := range listed {
		if rec, before, err := Load(other, l.Digest); err != nil || len(before) != l.Before || rec.Request.Name != l.Request.Name {
			t.Fatalf("the bundle of %s: %v", l.Digest, err)
		}
	}
	if _, err := LoadModule(other, "sha256:"+strings.TrimPrefix(digestOf([]byte("\x00asm module bytes")), "sha256:")); err != nil {
		t.Fatalf("the bundle has no module: %v", err)
	}

	// A step changed: the chain does not match.
	log := filepath.Join(dir, "i-1", stepsLog)
	docs, _ := readDocs(log, -1)
	first, _ := docBytes(log, 0, 1)
	second, _ := docBytes(log, 1, 2)
	rest, _ := docBytes(log, 2, len(docs))
	swapped := slices.Concat(second, first, rest)
	must(t, os.WriteFile(filepath.Join(dir, "i-1", stepsLog), swapped, 0o600))
	if _, _, err := Load(dir, listed[1].Digest); err == nil || !strings.Contains(err.Error(), "not those it was recorded with") {
		t.Fatalf("loading with two steps swapped: %v", err)
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
	lineages := map[string][]*Step{}
	for i := range 40 {
		inst := fmt.Sprint(i / 4)
		if lineages[inst] == nil {
			lineages[inst] = []*Step{step(StepInitialize, fmt.Sprintf("init %s %s", inst, incompressible(i*37)))}
		}
		rec := recordingOf(inst, fmt.Sprint(i))
		s.Put(rec, lineages[inst])
		lineages[inst] = append(lineages[inst], rec.Step)
	}
	s.Flush()
	s.Close()
	if b := s.Bytes(); b > 8<<10 {
		t.Fatalf("the store holds %d bytes, more than its bound", b)
	}
	names := loadAll(t, dir)
	if len(names) == 0 || len(names) >= 40 || !names["39"] || names["0"] {
		t.Fatalf("kept %v of 40; want the newest, not the oldest", names)
	}

	s2, err := Open(dir, 4<<10, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if b := s2.Bytes(); b > 4<<10 {
		t.Fatalf("reopened with a smaller bound, the store holds %d bytes", b)
	}
	if kept := loadAll(t, dir); len(kept) >= len(names) {
		t.Fatalf("reopened with a smaller bound, the store kept %d recordings of %d", len(kept), len(names))
	}
}

// incompressible is n bytes that zstd cannot make smaller.
func incompressible(n int) string {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return string(b)
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
		names[rec.Request.Name] = true
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
	for _, p := range []Policy{{Mode: "everything"}, {Mode: ModeSample}, {Mode: ModeSample, Sample: 2}, {Mode: ModeAll, Sample: 0.5}, {Mode: ModeAll, MaxBytes: resource.NewQuantity(-1, resource.BinarySI)}} {
		if err := p.Check("record"); err == nil || !strings.HasPrefix(err.Error(), "record.") {
			t.Errorf("%+v: %v; want an error naming the field", p, err)
		}
	}
}

// A file that is not a recording of this format is refused.
func TestDecodeRefuses(t *testing.T) {
	for _, b := range []string{`{"format":"other/v9","instance":"1"}`, `{"format":"` + Format + `"}`, `{"format":"` + Format + `","instance":"1","extra":1}`} {
		if _, err := DecodeRecording([]byte(b)); err == nil {
			t.Errorf("%s: decoded", b)
		}
	}
}

// A module the plugin runs is written with the first recording made with it, not before: a
// store that records nothing (failures mode while nothing fails) writes nothing. The store
// holds the last two modules offered, no more.
func TestStoreWritesAModuleWithItsFirstRecording(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 0, logr.Discard())
	must(t, err)
	defer s.Close()
	s.KeepModule(digestOf(testModule), testModule)
	s.Flush()
	if _, err := LoadModule(dir, digestOf(testModule)); err == nil {
		t.Fatal("the module was written before any recording made with it")
	}
	s.Put(recordingOf("1", "a"), []*Step{step(StepInitialize, "init")})
	s.Flush()
	if b, err := LoadModule(dir, digestOf(testModule)); err != nil || !bytes.Equal(b, testModule) {
		t.Fatalf("after a recording made with it, the module came back as %q, %v", b, err)
	}

	old := []byte("\x00asm an older version")
	s.KeepModule(digestOf(old), old)
	for _, v := range []string{"v2", "v3"} {
		s.KeepModule(digestOf([]byte(v)), []byte(v))
	}
	rec := recordingOf("2", "b")
	rec.Module = digestOf(old)
	s.Put(rec, []*Step{step(StepInitialize, "init")})
	s.Flush()
	if _, err := LoadModule(dir, digestOf(old)); err == nil {
		t.Fatal("a module offered before the last two was still held and written")
	}
}

// A log of format v1, one document per entry and no newline, reads as v2's.
func TestReadDocsOfV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), stepsLog)
	var v1 []byte
	for _, doc := range []string{`{"kind":"initialize"}`, `{"kind":"reconcile"}`} {
		v1 = appendEntry(v1, []byte(doc))
	}
	must(t, os.WriteFile(path, append(v1, 9, 0, 0, 0, 1), 0o600)) // and an entry cut short
	docs, err := readDocs(path, -1)
	if err != nil || len(docs) != 2 || string(docs[1]) != `{"kind":"reconcile"}` {
		t.Fatalf("read %q, %v", docs, err)
	}
}

// A module of more than a quarter of the store's bound is not kept beside its recordings: it
// would crowd them out, and be written again each time the bound dropped it.
func TestStoreKeepsNoModuleTooBigForItsBound(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 16<<10, logr.Discard())
	must(t, err)
	defer s.Close()
	big := []byte("\x00asm" + incompressible(5<<10))
	s.KeepModule(digestOf(big), big)
	for i := range 3 {
		rec := recordingOf(fmt.Sprint(i), "a")
		rec.Module = digestOf(big)
		s.Put(rec, []*Step{step(StepInitialize, "init")})
		s.Flush()
	}
	if _, err := LoadModule(dir, digestOf(big)); err == nil {
		t.Fatal("a module of more than a quarter of the bound was kept")
	}
	if n := len(s.List()); n != 3 {
		t.Fatalf("%d recordings kept, want 3", n)
	}
}
