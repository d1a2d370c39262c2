package wasm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm"
)

func recordAPI() *fakeAPI {
	return &fakeAPI{objects: map[string]string{
		"ConfigMap/ns/a": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"a","resourceVersion":"1"}}`,
		"ConfigMap/ns/b": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"b","resourceVersion":"2"}}`,
	}}
}

// recordCalls runs reconciles of these names on m, one at a time, and returns their Calls.
func recordCalls(t *testing.T, m *wasm.Module, host wasm.Host, names ...string) []*wasm.Call {
	t.Helper()
	var calls []*wasm.Call
	for _, n := range names {
		c := &wasm.Call{Request: abi.Request{Namespace: "ns", Name: n}, Host: host}
		_, _ = m.Reconcile(context.Background(), c)
		if c.Step == nil {
			t.Fatalf("reconcile of %s: no step recorded", n)
		}
		calls = append(calls, c)
	}
	return calls
}

func replay(t *testing.T, e *wasm.Engine, wasmBytes []byte, before []*recording.Step, step *recording.Step) error {
	t.Helper()
	m := compile(t, e, wasmBytes, wasm.Options{Name: "record"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return m.Replay(ctx, before, step)
}

// A Go guest that keeps state in its heap, reads both clocks, draws random numbers and ranges
// over a map replays bit for bit, each of its reconciles from the instance's _initialize on.
func TestReplayIsExact(t *testing.T) {
	e := engine(t)
	b := module(t, "testguests", "record-go")
	m := compile(t, e, b, wasm.Options{Name: "record", Record: true})
	api := recordAPI()
	calls := recordCalls(t, m, api, "a", "b", "a", "a", "b", "a", "a", "a")

	first := calls[0]
	if len(first.Before) != 2 || first.Before[0].Kind != recording.StepInitialize || first.Before[1].Kind != recording.StepManifest {
		t.Fatalf("the first reconcile's instance ran %s before it; want its _initialize and its manifest", kinds(first.Before))
	}
	last := calls[len(calls)-1]
	if n := len(last.Before); n != 2+len(calls)-1 {
		t.Fatalf("the last reconcile has %d steps before it, want %d", n, 2+len(calls)-1)
	}
	if calls[6].Step.Outcome != recording.Returned || !bytes.Contains(calls[6].Step.Result, []byte("every fifth")) {
		t.Fatalf("the fifth reconcile of a: outcome %s, result %q; want it returned its error", calls[6].Step.Outcome, calls[6].Step.Result)
	}
	var sawPatch, sawClock, sawRandom, sawLog, sawWrite bool
	for _, c := range calls {
		for _, ev := range c.Step.Events {
			switch ev.Type {
			case recording.EventCall:
				sawPatch = sawPatch || ev.Fn == abi.ImportPatch
			case recording.EventMonotime, recording.EventWalltime:
				sawClock = true
			case recording.EventLog:
				sawLog = true
			case recording.EventWrite:
				sawWrite = true
			}
		}
	}
	for _, ev := range first.Before[0].Events {
		sawRandom = sawRandom || ev.Type == recording.EventRandom
	}
	if !sawPatch || !sawClock || !sawRandom || !sawLog || !sawWrite {
		t.Fatalf("recorded: patch %v, clock %v, random bytes at _initialize %v, log %v, stdout %v; want all", sawPatch, sawClock, sawRandom, sawLog, sawWrite)
	}
	for i, c := range calls {
		if err := replay(t, e, b, c.Before, c.Step); err != nil {
			t.Errorf("replaying reconcile %d: %v", i, err)
		}
	}

	// The count the guest keeps is the state: a replay that leaves out a step before must differ.
	skipped := append(append([]*recording.Step(nil), last.Before[:3]...), last.Before[4:]...)
	var d *wasm.Difference
	if err := replay(t, e, b, skipped, last.Step); !errors.As(err, &d) {
		t.Fatalf("replaying with a step left out: %v, want a difference", err)
	}
	t.Logf("a step left out: %v", d)
}

// What the guest is given decides what it does: a recorded answer changed shows as the first
// request that differs.
func TestReplayShowsTheFirstDifference(t *testing.T) {
	e := engine(t)
	b := module(t, "testguests", "record-go")
	m := compile(t, e, b, wasm.Options{Name: "record", Record: true})
	calls := recordCalls(t, m, recordAPI(), "a", "b", "a")
	c := calls[2]

	// The wall clock the third reconcile read goes into its patch.
	step := cloneStep(c.Step)
	wall := -1
	for i, ev := range step.Events {
		if ev.Type == recording.EventWalltime {
			wall = i
			step.Events[i].N += int64(time.Hour)
			break
		}
	}
	if wall < 0 {
		t.Fatal("the reconcile read no wall clock")
	}
	err := replay(t, e, b, c.Before, step)
	var d *wasm.Difference
	if !errors.As(err, &d) {
		t.Fatalf("replaying a changed clock: %v, want a difference", err)
	}
	if d.Step != len(c.Before) || d.Kind != recording.StepReconcile || d.Event <= wall || d.Want == nil || d.Want.Fn != abi.ImportPatch || d.Got == nil || d.Got.Fn != abi.ImportPatch {
		t.Fatalf("difference %v; want the reconcile's patch, after event %d", d, wall)
	}
	if !strings.Contains(d.Error(), "a call to patch") {
		t.Fatalf("the difference says %q; want it to name the call", d.Error())
	}

	// Another build of the plugin differs where its code does: the patch of its first reconcile.
	err = replay(t, e, module(t, "testguests", "record-v2-go"), calls[0].Before, calls[0].Step)
	if !errors.As(err, &d) || d.Kind != recording.StepReconcile || d.Want == nil || d.Want.Fn != abi.ImportPatch {
		t.Fatalf("replaying on version 2: %v; want a difference at the patch", err)
	}
	if !bytes.Contains(d.Got.In, []byte(`"version":"2"`)) {
		t.Fatalf("version 2's patch is %q", d.Got.In)
	}
}

// An instance started from the snapshot begins with the recorded _initialize the snapshot was
// taken after, and replays from it.
func TestReplayFromSnapshot(t *testing.T) {
	e := engine(t)
	b := module(t, "testguests", "record-go")
	m := compile(t, e, b, wasm.Options{Name: "record", Record: true, MaxInstances: 2})
	api := &barrierAPI{fakeAPI: recordAPI(), n: 2}
	api.wg.Add(2)
	var wg sync.WaitGroup
	calls := make([]*wasm.Call, 2)
	for i, n := range []string{"a", "b"} {
		calls[i] = &wasm.Call{Request: abi.Request{Namespace: "ns", Name: n}, Host: api}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = m.Reconcile(context.Background(), calls[i])
		}()
	}
	wg.Wait()
	if s := m.Stats(); s.Instantiated != 2 {
		t.Fatalf("%d instances made; want 2", s.Instantiated)
	}
	var fromSnapshot *wasm.Call
	for _, c := range calls {
		if len(c.Before) == 1 {
			fromSnapshot = c
		}
	}
	if fromSnapshot == nil {
		t.Fatalf("no reconcile ran on an instance from the snapshot: steps before them %s and %s", kinds(calls[0].Before), kinds(calls[1].Before))
	}
	if fromSnapshot.Before[0] != calls[0].Before[0] && fromSnapshot.Before[0] != calls[1].Before[0] {
		t.Fatal("the instance from the snapshot does not share the _initialize of the first")
	}
	for i, c := range calls {
		if err := replay(t, e, b, c.Before, c.Step); err != nil {
			t.Errorf("replaying reconcile %d: %v", i, err)
		}
	}
}

// An instance whose recorded steps pass wasm.MaxLineage is replaced, so that what a replay of
// its reconciles needs stays bounded.
func TestRecordingBoundsAnInstancesSteps(t *testing.T) {
	e := engine(t)
	m := compile(t, e, module(t, "testguests", "record-go"), wasm.Options{Name: "record", Record: true})
	api := recordAPI()
	api.objects["ConfigMap/ns/a"] = fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"a"},"data":{"big":%q}}`, strings.Repeat("x", 3<<20))
	calls := recordCalls(t, m, api, "a", "a", "a", "a")
	if s := m.Stats(); s.Recycled != 1 || s.Instantiated != 2 {
		t.Fatalf("recycled %d, instantiated %d; want the instance replaced once", s.Recycled, s.Instantiated)
	}
	if n := len(calls[3].Before); n != 1 {
		t.Fatalf("the reconcile after the replacement has %d steps before it; want 1, the snapshot's _initialize", n)
	}
}

// barrierAPI holds its first n gets until n are waiting, so that n reconciles run at once.
type barrierAPI struct {
	*fakeAPI
	mu sync.Mutex
	n  int
	wg sync.WaitGroup
}

func (b *barrierAPI) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	b.mu.Lock()
	wait := fn == abi.ImportGet && b.n > 0
	if wait {
		b.n--
	}
	b.mu.Unlock()
	if wait {
		b.wg.Done()
		b.wg.Wait()
	}
	return b.fakeAPI.Call(ctx, fn, req)
}

func kinds(steps []*recording.Step) string {
	var k []string
	for _, s := range steps {
		k = append(k, s.Kind)
	}
	return "[" + strings.Join(k, " ") + "]"
}

func cloneStep(s *recording.Step) *recording.Step {
	c := &recording.Step{Kind: s.Kind, Request: s.Request, Result: s.Result, Outcome: s.Outcome, Error: s.Error}
	c.Events = append([]recording.Event(nil), s.Events...)
	return c
}

// Another build, rerun on a recording, shows what it would have done: version 2 of the record
// guest writes one more field; the recorded build, rerun, does what it did, its state and
// inputs made again as a replay's.
func TestRerunOnAnotherBuild(t *testing.T) {
	e := engine(t)
	m := compile(t, e, module(t, "testguests", "record-go"), wasm.Options{Name: "record", Record: true})
	calls := recordCalls(t, m, recordAPI(), "a", "b", "a", "a", "a")
	rerun := func(build string, c *wasm.Call) []string {
		t.Helper()
		m := compile(t, e, module(t, "testguests", build), wasm.Options{Name: "record"})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got, err := m.Rerun(ctx, c.Before, c.Step)
		if err != nil {
			t.Fatal(err)
		}
		return recording.Compare(c.Step, got)
	}
	for i, c := range calls {
		if d := rerun("record-go", c); len(d) > 0 {
			t.Errorf("reconcile %d rerun on its own build differs: %v", i, d)
		}
	}
	last := calls[len(calls)-1] // the fifth of a: it fails, in both builds
	d := rerun("record-v2-go", last)
	if len(d) != 1 || !strings.Contains(d[0], `patch v1 ConfigMap ns/a-out: data.version: added "2"`) {
		t.Fatalf("version 2 against the recording: %q; want its one new field", d)
	}
}
