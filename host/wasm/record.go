package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
)

// What an instance's guest reads from outside its memory goes through these, so that a module
// that records (Options.Record) keeps it, and a replay gives it back.

// newInstanceID is a random name for an instance, for its recordings.
func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// monotime is the guest's monotonic clock, now reading now.
func (inst *instance) monotime(now int64) int64 {
	if want := inst.expect(recording.Event{Type: recording.EventMonotime}); want != nil {
		now = want.N
	}
	inst.record(recording.Event{Type: recording.EventMonotime, N: now})
	return now
}

// walltime is the guest's wall clock.
func (inst *instance) walltime() (sec int64, nsec int32) {
	now := time.Now().UnixNano()
	if want := inst.expect(recording.Event{Type: recording.EventWalltime}); want != nil {
		now = want.N
	}
	inst.record(recording.Event{Type: recording.EventWalltime, N: now})
	return now / 1e9, int32(now % 1e9)
}

// randomSource is the guest's random_get.
type randomSource struct{ inst *instance }

func (r randomSource) Read(p []byte) (int, error) {
	inst := r.inst
	if want := inst.expect(recording.Event{Type: recording.EventRandom, N: int64(len(p))}); want != nil {
		copy(p, want.Out)
	} else if _, err := rand.Read(p); err != nil {
		return 0, err
	}
	if inst.step != nil {
		inst.record(recording.Event{Type: recording.EventRandom, N: int64(len(p)), Out: bytes.Clone(p)})
	}
	return len(p), nil
}

// recordSleep notes a sleep the guest asked for; in a replay it says not to sleep.
func (inst *instance) recordSleep(ns int64) (replayed bool) {
	want := inst.expect(recording.Event{Type: recording.EventSleep, N: ns})
	inst.record(recording.Event{Type: recording.EventSleep, N: ns})
	return want != nil
}

// recordOutput notes what the guest wrote to its stdout or stderr, or logged.
func (inst *instance) recordOutput(e recording.Event) {
	if inst.step == nil {
		return
	}
	e.In = bytes.Clone(e.In)
	inst.expect(e)
	inst.record(e)
}

// record adds e to the step in progress, if the instance records.
func (inst *instance) record(e recording.Event) {
	if inst.step != nil {
		inst.step.Add(e)
	}
}

// expect, in a replay, checks the guest's next event against the recording's, and returns the
// recorded one, whose answer the guest gets; a difference stops the guest. Outside a replay it
// returns nil.
func (inst *instance) expect(got recording.Event) *recording.Event {
	r := inst.replay
	if r == nil || inst.step == nil {
		return nil
	}
	return r.expect(len(inst.step.Events), got)
}

// replayer feeds the guest of a replay what its recording says it read, one step after the
// other, and stops it at the first thing it does that the recording does not say.
type replayer struct {
	steps []*recording.Step // the lineage, then the replayed step
	at    int               // the step running
	diff  *Difference
	// stopped says the replay stopped the step where its recording was stopped at its
	// deadline: it timed out as the recording did.
	stopped bool
	// rerun, if set, answers what the recording can and never stops the guest (Rerun).
	rerun *rerunner
}

// errDiverged stops a replay's guest when it does what the recording does not say;
// errRecordingEnds where the recorded step was stopped at its deadline.
var (
	errDiverged      = errors.New("the replay differs from the recording")
	errRecordingEnds = errors.New("the recorded reconcile was stopped here, at its deadline")
)

func (r *replayer) step() *recording.Step { return r.steps[r.at] }

func (r *replayer) expect(i int, got recording.Event) *recording.Event {
	if r.rerun != nil {
		return r.rerun.answer(r.step(), got)
	}
	want := r.step().Events
	if i >= len(want) {
		if r.step().Outcome == recording.TimedOut { // it was stopped here, at its deadline
			r.stopped = true
			panic(errRecordingEnds)
		}
		r.differ(i, nil, &got, "the guest did more than the recording holds")
		panic(errDiverged)
	}
	w := &want[i]
	if !sameRequest(w, &got) {
		r.differ(i, w, &got, "")
		panic(errDiverged)
	}
	return w
}

// sameRequest reports whether got asks what want asked, or gives out what want gave.
func sameRequest(want, got *recording.Event) bool {
	if want.Type != got.Type || want.Fn != got.Fn {
		return false
	}
	if !bytes.Equal(want.In, got.In) && !(got.Fn == abi.ImportList && sameList(want.In, got.In)) {
		return false
	}
	switch got.Type {
	case recording.EventRandom, recording.EventSleep, recording.EventLog:
		return want.N == got.N
	case recording.EventCall:
		return want.N == got.N // the length of a request too large to be read
	}
	return true
}

func (r *replayer) differ(i int, want, got *recording.Event, why string) {
	if r.diff == nil {
		r.diff = &Difference{Step: r.at, Kind: r.step().Kind, Event: i, Want: want, Got: got, Why: why}
	}
}

// endStep checks the end of a replayed step, got, against the recording's, and moves to the
// next.
func (r *replayer) endStep(got *recording.Step) error {
	if r.rerun != nil {
		r.at++
		*r.rerun = rerunner{seed: r.rerun.seed}
		return nil
	}
	if r.diff != nil {
		return r.diff
	}
	want := r.step()
	if r.stopped {
		got.Outcome, r.stopped = recording.TimedOut, false
	}
	switch {
	case len(got.Events) < len(want.Events) && !(want.Outcome == recording.TimedOut && got.Outcome == recording.TimedOut):
		w := want.Events[len(got.Events)]
		r.differ(len(got.Events), &w, nil, fmt.Sprintf("the guest ended (%s) before the recording's next event", got.Outcome))
	case got.Outcome != want.Outcome:
		r.differ(-1, nil, nil, fmt.Sprintf("the recorded step: %s; the replay: %s%s", want.Describe(), got.Describe(), errorOf(got)))
	case !bytes.Equal(got.Result, want.Result):
		r.differ(-1, nil, nil, fmt.Sprintf("the recorded step: %s; the replay: %s", want.Describe(), got.Describe()))
	}
	if r.diff != nil {
		r.diff.WantStep, r.diff.GotStep = want, got
		return r.diff
	}
	r.at++
	return nil
}

func errorOf(s *recording.Step) string {
	if s.Error == "" {
		return ""
	}
	return ": " + s.Error
}

// Difference is where a replay first did other than its recording.
type Difference struct {
	// Step is the index of the step in the recording's lineage (0 its _initialize), the
	// replayed reconcile last; Kind is its kind.
	Step int
	Kind string
	// Event is the index of the event in the step, -1 for the step's end.
	Event int
	// Want is the recorded event (nil: the recording has none there), Got what the guest did
	// instead (nil: nothing, it ended).
	Want, Got *recording.Event
	// Why says it in words, when Want and Got do not.
	Why string
	// WantStep and GotStep are the step as recorded and as replayed, up to the difference.
	WantStep, GotStep *recording.Step
}

func (d *Difference) Error() string {
	where := fmt.Sprintf("step %d (%s)", d.Step, d.Kind)
	if d.Event >= 0 {
		where += fmt.Sprintf(", event %d", d.Event)
	}
	if d.Why != "" {
		return where + ": " + d.Why
	}
	return fmt.Sprintf("%s: the recording has %s, the replay %s", where, DescribeEvent(d.Want), DescribeEvent(d.Got))
}

// LogText is a guest's log call's message (its text, a NUL, then its keys and values as a JSON
// list) as the host logs it: "reconciled app=demo/web generation=2".
func LogText(msg []byte) string {
	text, kv := splitLog(msg)
	for i := 0; i+1 < len(kv); i += 2 {
		text += fmt.Sprintf(" %v=%v", kv[i], kv[i+1])
	}
	return text
}

// DescribeEvent says an event in a line.
func DescribeEvent(e *recording.Event) string {
	if e == nil {
		return "nothing"
	}
	clip := func(b []byte) string {
		if len(b) > 200 {
			return fmt.Sprintf("%q... (%d bytes)", b[:200], len(b))
		}
		return fmt.Sprintf("%q", b)
	}
	switch e.Type {
	case recording.EventCall:
		return fmt.Sprintf("a call to %s with %s", e.Fn, clip(e.In))
	case recording.EventMonotime:
		return "a reading of the monotonic clock"
	case recording.EventWalltime:
		return "a reading of the wall clock"
	case recording.EventRandom:
		return fmt.Sprintf("%d random bytes drawn", e.N)
	case recording.EventSleep:
		return fmt.Sprintf("a sleep of %s", time.Duration(e.N))
	case recording.EventWrite:
		return fmt.Sprintf("%s written to %s", clip(e.In), e.Fn)
	case recording.EventLog:
		return fmt.Sprintf("a log line at level %d: %s", e.N, clip([]byte(LogText(e.In))))
	}
	return e.Type
}

// Replay runs a recorded reconcile again, on a new instance of m, with no cluster: first the
// steps its instance ran before it (before, from its _initialize), then the reconcile (step).
// The guest reads what the recording says it read (each host call's answer, the clocks, the
// random bytes), and does what it says the guest did: each host call with the same bytes in
// the same order, the same output, the same outcome and result. Replay returns the first
// difference as a *Difference, nil if there is none, or another error if it could not run.
// m must be compiled with the recording's settings (its name and memory limit, whether it is
// interruptible); a replay that does not end within ctx fails.
func (m *Module) Replay(ctx context.Context, before []*recording.Step, step *recording.Step) error {
	if len(before) == 0 || before[0].Kind != recording.StepInitialize {
		return errors.New("the recording does not start with its instance's _initialize")
	}
	select {
	case <-m.tokens:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	rp := &replayer{steps: append(before[:len(before):len(before)], step)}
	inst, err := m.newInstance(ctx, rp)
	if err != nil {
		m.tokens <- struct{}{}
		if rp.diff != nil {
			return rp.diff
		}
		return err
	}
	defer m.put(inst, false)
	for _, want := range rp.steps[1:] {
		switch want.Kind {
		case recording.StepManifest:
			_, _ = inst.readManifest(ctx)
			if err := rp.endStep(inst.lineage[len(inst.lineage)-1]); err != nil {
				return err
			}
		case recording.StepReconcile, recording.StepMap:
			if err := inst.runStep(ctx, rp.at, want); err != nil {
				return err
			}
			got := inst.step
			inst.endStep()
			if err := rp.endStep(got); err != nil {
				return err
			}
		default:
			return fmt.Errorf("step %d is of kind %q: only the first may be an _initialize", rp.at, want.Kind)
		}
	}
	return nil
}

// runStep runs want, a recorded reconcile or map (step number at), again on inst, as a step of
// its own: inst.step holds what the guest did.
func (inst *instance) runStep(ctx context.Context, at int, want *recording.Step) error {
	c := &Call{Logger: inst.module.opts.Logger}
	switch {
	case want.Kind == recording.StepReconcile && want.Request != nil:
		inst.step = &recording.Step{Kind: recording.StepReconcile, Request: want.Request}
		c.Request = abi.Request{Namespace: want.Request.Namespace, Name: want.Request.Name, Retries: want.Request.Retries}
		_, _, _ = inst.reconcile1(ctx, c, false) // recorded with every line
	case want.Kind == recording.StepMap && want.Map != nil:
		inst.step = &recording.Step{Kind: recording.StepMap, Map: want.Map}
		c.Map = want.Map
		_, _, _ = inst.map1(ctx, c)
	default:
		return fmt.Errorf("step %d, a %s, has no input", at, want.Kind)
	}
	return nil
}

// Settings are the module's settings its guests can tell apart, which a replay must have.
func (m *Module) Settings() recording.Settings {
	return recording.Settings{Name: m.opts.Name, MemoryLimit: m.opts.MemoryLimit, Interruptible: *m.opts.Interruptible}
}

// ReplayOptions are the Options of a module that replays recordings made with s.
func ReplayOptions(s recording.Settings) Options {
	return Options{Name: s.Name, MemoryLimit: s.MemoryLimit, Interruptible: &s.Interruptible, Snapshots: new(false), IdleTimeout: -1, CodeIdleTimeout: -1}
}
