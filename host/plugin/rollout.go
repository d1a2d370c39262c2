package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/plugin/internal/hostcalls"
	"github.com/wasmrec/wasmrec/host/plugin/internal/rollout"
	"github.com/wasmrec/wasmrec/host/plugin/internal/watches"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/tracing"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// RolloutConfig is how a plugin's new module versions come in: a shadow run, canary shares of
// keys, and the bounds each step is judged by. See Config.Rollout.
type RolloutConfig = rollout.Config

// A rollout's stages, as RolloutStatus.Stage says them.
const (
	StageReplay     = "Replay"     // the new version runs on the live one's recordings, offline
	StageShadow     = "Shadow"     // the new version shadows the live one, its writes dry-run
	StageCanary     = "Canary"     // the new version reconciles a share of the keys
	StagePromoted   = "Promoted"   // the new version serves every key
	StageRolledBack = "RolledBack" // the new version did worse than the live one, and was dropped
	StageAborted    = "Aborted"    // an operator, a newer version or the plugin's stop ended it
)

// RolloutStatus is a rollout of a new module version, running or ended, as a plugin object's
// status shows it.
type RolloutStatus struct {
	Stage       string       `json:"stage"`
	Step        string       `json:"step"` // the step it is at, or ended at: "shadow", "canary 25%"
	Candidate   string       `json:"candidate"`
	Live        string       `json:"live"` // the version it started from
	Started     metav1.Time  `json:"started"`
	StepStarted metav1.Time  `json:"stepStarted"`
	Ended       *metav1.Time `json:"ended,omitempty"`
	// The versions' figures over the step it is at (or ended at): in the shadow step, over the
	// keys both reconciled; in a canary step, over the keys each reconciled.
	CandidateFigures rollout.Figures `json:"candidateFigures"`
	LiveFigures      rollout.Figures `json:"liveFigures"`
	// Differences are the shadow step's, kept after it.
	Differences *rollout.Differences `json:"differences,omitempty"`
	// Message says what it waits for, or why it moved on, was promoted, rolled back or aborted.
	Message string `json:"message"`
}

// Active reports whether the rollout still runs.
func (s *RolloutStatus) Active() bool { return s.Ended == nil }

// RolloutEvent is a rollout's news: it started, moved on a step, or ended.
type RolloutEvent struct {
	Reason string // RolloutStarted, RolloutStep, RolloutPromoted, RolloutRolledBack, RolloutAborted
	Status RolloutStatus
	// Dropped is true when the new version ended refused: rolled back, or aborted by an
	// operator. It is not tried again until the plugin's source changes.
	Dropped bool
}

// rolloutTick is how often a running rollout is judged.
const rolloutTick = 250 * time.Millisecond

// rollingOut is a rollout in progress: the candidate version and where it stands. Its steps
// and windows change under the plugin's swapMu.
type rollingOut struct {
	cand    *version
	srcs    watches.Sources // the controller's sources with the candidate's; nil if they are the live version's; under swapMu
	live    string          // the live version's digest when it started
	steps   []rollout.Step
	started time.Time
	stop    chan struct{}  // closed when it ends
	shadows chan struct{}  // a token per shadow reconcile running
	sample  rate.Sometimes // differing writes logged
	at      atomic.Int32   // the step
	window  atomic.Pointer[window]
	shadow  atomic.Pointer[rollout.Differences] // the shadow step's, once it ended
	message atomic.Pointer[string]              // why it moved on to the step it is at
}

// window is one step's figures.
type window struct {
	step       rollout.Step
	started    time.Time
	live, cand rollout.Counter
	diffs      rollout.DiffCounter
	need       atomic.Int64 // the new version's reconciles the step needs
}

func newWindow(step rollout.Step, started time.Time) *window {
	w := &window{step: step, started: started}
	w.need.Store(int64(step.MinReconciles))
	return w
}

// judged is the step as it is judged: needing the reconciles it needs now.
func (w *window) judged() rollout.Step {
	st := w.step
	st.MinReconciles = int(w.need.Load())
	return st
}

// expect lowers the reconciles the step needs to the n keys it enqueued at its start, if that
// is fewer: a plugin with 5 objects and no events does not wait for 20 reconciles for ever.
// Where the keys could not be listed (a follower, whose controller does not run) it needs them
// all: it waits until it runs them.
func (w *window) expect(n int, ok bool) {
	if ok && int64(n) < w.need.Load() {
		w.need.Store(int64(n))
	}
}

// beginRollout makes next the candidate of a rollout from old, under swapMu: from now on it
// shadows old or takes a share of the keys, as the plugin's rollout says, until it is promoted
// or rolled back. srcs are the sources with its watches, already added and synced (nil: old's).
func (p *Plugin) beginRollout(ctx context.Context, old, next *version, srcs watches.Sources) {
	ro := &rollingOut{cand: next, srcs: srcs, live: old.mod.Digest(), steps: p.cfg.Rollout.Steps(), started: time.Now(),
		stop: make(chan struct{}), shadows: make(chan struct{}, max(p.cfg.MaxConcurrentReconciles, 1)),
		sample: rate.Sometimes{Interval: 10 * time.Second}}
	names := make([]string, len(ro.steps))
	for i, st := range ro.steps {
		names[i] = st.Name()
	}
	msg := fmt.Sprintf("a new version came in: %s, then every key", strings.Join(names, ", "))
	ro.message.Store(&msg)
	w := newWindow(ro.steps[0], ro.started)
	ro.window.Store(w)
	p.setKeys(p.srcs, srcs)
	p.ro.Store(ro)
	p.log.Info("rolling out a new module version", "from", old.mod.ShortDigest(), "to", next.mod.ShortDigest(), "step", ro.steps[0].Name(), "steps", len(ro.steps))
	w.expect(p.enqueueAll(ctx, nil)) // every key, so that the first step has figures
	p.rolloutNews(ro, "RolloutStarted", nil, "", false)
	go p.drive(ro)
}

// drive judges ro every rolloutTick until it ends.
func (p *Plugin) drive(ro *rollingOut) {
	t := time.NewTicker(rolloutTick)
	defer t.Stop()
	for {
		select {
		case <-ro.stop:
			return
		case <-t.C:
		}
		w := ro.window.Load()
		if w.step.Replay {
			if why, ok := p.replayStep(ro); !ok {
				p.endRollout(ro, StageRolledBack, "the new version did worse than the live one: "+why, true)
			} else {
				p.nextStepWhy(ro, w, "the replay step passed: "+why)
			}
			continue
		}
		v, why := p.cfg.Rollout.Analysis.Judge(w.judged(), w.live.Figures(), w.cand.Figures(), w.diffs.Differences())
		switch {
		case v == rollout.Beyond:
			p.endRollout(ro, StageRolledBack, "the new version did worse than the live one: "+why, true)
		case v == rollout.Within && time.Since(w.started) >= w.step.Duration:
			p.nextStep(ro, w)
		}
	}
}

// nextStep moves ro on from the step of w, which passed, or promotes its candidate after the
// last step.
func (p *Plugin) nextStep(ro *rollingOut, w *window) {
	p.nextStepWhy(ro, w, fmt.Sprintf("the %s step passed: the new version's %s, the live version's %s", w.step.Name(), w.cand.Figures(), w.live.Figures()))
}

// nextStepWhy is nextStep, passed saying why the step passed.
func (p *Plugin) nextStepWhy(ro *rollingOut, w *window, passed string) {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	if p.ro.Load() != ro || ro.window.Load() != w {
		return
	}
	if w.step.Shadow() {
		d := w.diffs.Differences()
		ro.shadow.Store(&d)
		passed += fmt.Sprintf("; %d of %d compared reconciles wrote differently", d.Writes, d.Compared)
	}
	at := int(ro.at.Load()) + 1
	if at == len(ro.steps) {
		p.promoteLocked(ro, passed)
		return
	}
	next := ro.steps[at]
	ro.at.Store(int32(at))
	ro.message.Store(&passed)
	nw := newWindow(next, time.Now())
	ro.window.Store(nw)
	p.log.Info("rollout: "+passed, "candidate", ro.cand.mod.ShortDigest(), "step", next.Name())
	// The keys the new version takes now are reconciled by it, as a swap would; after the
	// replay step, every key, for the next step's figures.
	from := w.step.Share
	nw.expect(p.enqueueAll(context.Background(), func(req reconcile.Request) bool {
		return w.step.Replay || rollout.Candidate(req.Namespace, req.Name, next.Share) && !rollout.Candidate(req.Namespace, req.Name, from)
	}))
	p.rolloutNews(ro, "RolloutStep", w, "", false)
}

// promoteLocked makes ro's candidate the live version for every key, under swapMu.
func (p *Plugin) promoteLocked(ro *rollingOut, why string) {
	w := ro.window.Load()
	p.ro.Store(nil)
	close(ro.stop)
	p.publish(context.Background(), p.current.Load(), ro.cand, ro.srcs, false, ro.started)
	p.lastRollout.Store(p.rolloutStatus(ro, w, StagePromoted, why, true))
	if m := p.host.metrics; m != nil {
		m.Rollouts.WithLabelValues(p.cfg.Name, "promoted").Inc()
	}
	p.log.Info("rollout: the new version serves every key: "+why, "digest", ro.cand.mod.ShortDigest(), "took", time.Since(ro.started).Round(time.Millisecond))
	p.rolloutNews(ro, "RolloutPromoted", w, StagePromoted, false)
}

// endRollout drops ro's candidate, the live version serving on: a rollback (the candidate is
// then refused until its source changes) or an abort. A rollout ended already is left alone.
func (p *Plugin) endRollout(ro *rollingOut, stage, why string, refuse bool) bool {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	return p.endRolloutLocked(ro, stage, why, refuse)
}

func (p *Plugin) endRolloutLocked(ro *rollingOut, stage, why string, refuse bool) bool {
	if ro == nil || !p.ro.CompareAndSwap(ro, nil) {
		return false
	}
	close(ro.stop)
	w := ro.window.Load()
	if ro.srcs != nil { // the candidate's own sources go
		for id, s := range ro.srcs {
			if _, ok := p.srcs[id]; !ok {
				_ = p.ctrl.Unwatch(s.Src)
			}
		}
		p.setKeys(p.srcs, nil)
		if err := p.warm.update(); err != nil {
			p.log.Error(err, "releasing the informers of a dropped version's watches")
		}
	}
	digest := ro.cand.mod.Digest()
	if refuse {
		p.kept.Refuse(digest, &RolledBackError{Digest: digest, Why: why})
	}
	go func() { // once its reconciles are back
		_ = ro.cand.mod.Close(context.Background())
		ro.cand.index.Close()
	}()
	p.lastRollout.Store(p.rolloutStatus(ro, w, stage, why, true))
	outcome, reason := "aborted", "RolloutAborted"
	if stage == StageRolledBack {
		outcome, reason = "rolled_back", "RolloutRolledBack"
	}
	if m := p.host.metrics; m != nil {
		m.Rollouts.WithLabelValues(p.cfg.Name, outcome).Inc()
	}
	if stage == StageRolledBack {
		p.log.Error(errors.New(why), "rollout: rolled back; the live version serves every key, and the new one is not tried again until its source changes",
			"live", wasm.ShortDigest(p.Module().Digest()), "candidate", ro.cand.mod.ShortDigest(), "step", w.step.Name())
	} else {
		p.log.Info("rollout aborted: "+why, "live", wasm.ShortDigest(p.Module().Digest()), "candidate", ro.cand.mod.ShortDigest())
	}
	p.rolloutNews(ro, reason, w, stage, refuse)
	p.enqueueAll(context.Background(), func(req reconcile.Request) bool { // the keys it wrote for
		return !w.step.Shadow() && rollout.Candidate(req.Namespace, req.Name, w.step.Share)
	})
	return true
}

// RolledBackError is a module version rolled back for doing worse than the live one.
type RolledBackError struct {
	Digest, Why string
}

func (e *RolledBackError) Error() string {
	return fmt.Sprintf("%s was rolled back: %s", wasm.ShortDigest(e.Digest), e.Why)
}

// Promote ends the plugin's rollout now, the new version serving every key, whatever its
// figures; false if no rollout runs.
func (p *Plugin) Promote() bool {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	ro := p.ro.Load()
	if ro == nil {
		return false
	}
	p.promoteLocked(ro, "promoted by an operator at the "+ro.window.Load().step.Name()+" step")
	return true
}

// Abort ends the plugin's rollout now, the live version serving on; its candidate is not tried
// again until its source changes. False if no rollout runs.
func (p *Plugin) Abort(why string) bool {
	return p.endRollout(p.ro.Load(), StageAborted, why, true)
}

// Rollout is the plugin's rollout: the one running, else the last one that ended (nil: none
// since it loaded).
func (p *Plugin) Rollout() *RolloutStatus {
	if ro := p.ro.Load(); ro != nil {
		return p.rolloutStatus(ro, ro.window.Load(), "", "", false)
	}
	return p.lastRollout.Load()
}

// rolloutStatus says ro at window w; stage and why are its end, if ended.
func (p *Plugin) rolloutStatus(ro *rollingOut, w *window, stage, why string, ended bool) *RolloutStatus {
	st := &RolloutStatus{Stage: stage, Step: w.step.Name(), Candidate: ro.cand.mod.Digest(), Live: ro.live,
		Started: metav1.NewTime(ro.started), StepStarted: metav1.NewTime(w.started),
		CandidateFigures: w.cand.Figures(), LiveFigures: w.live.Figures(), Differences: ro.shadow.Load(), Message: why}
	if w.step.Shadow() {
		d := w.diffs.Differences()
		st.Differences = &d
	}
	if ended {
		now := metav1.Now()
		st.Ended = &now
		return st
	}
	st.Stage = StageCanary
	switch {
	case w.step.Replay:
		st.Stage = StageReplay
	case w.step.Shadow():
		st.Stage = StageShadow
	}
	st.Message = *ro.message.Load()
	if left := w.judged().MinReconciles - int(st.CandidateFigures.Reconciles); left > 0 {
		st.Message += fmt.Sprintf("; the %s step waits for %d more reconciles of the new version", w.step.Name(), left)
	} else if left := w.step.Duration - time.Since(w.started); left > 0 {
		st.Message += fmt.Sprintf("; the %s step ends in %s if its figures hold", w.step.Name(), left.Round(time.Second))
	}
	return st
}

// rolloutNews tells OnRollout and the metrics of ro's news. prev is the window of the step
// it left (nil: none); stage is its end, if it ended.
func (p *Plugin) rolloutNews(ro *rollingOut, reason string, prev *window, stage string, dropped bool) {
	if m := p.host.metrics; m != nil {
		if prev != nil {
			m.RolloutStep.DeleteLabelValues(p.cfg.Name, prev.step.Name())
		}
		if stage == "" {
			m.RolloutStep.WithLabelValues(p.cfg.Name, ro.window.Load().step.Name()).Set(1)
		}
	}
	if p.cfg.Hooks.OnRollout == nil {
		return
	}
	st := p.lastRollout.Load()
	if stage == "" {
		st = p.rolloutStatus(ro, ro.window.Load(), "", "", false)
	}
	p.cfg.Hooks.OnRollout(RolloutEvent{Reason: reason, Status: *st, Dropped: dropped})
}

// reconcileRolling runs one reconcile while ro runs: on the candidate if its step gives it the
// key, else on the live version, with the candidate shadowing it in the shadow step.
func (p *Plugin) reconcileRolling(ctx context.Context, req reconcile.Request, ro *rollingOut, call abi.Request, log logr.Logger) (abi.Result, error) {
	w := ro.window.Load()
	switch {
	case w.step.Replay: // the live version's alone, while the new one runs on its recordings
		res, _, err := p.run(ctx, req, call, nil, true, log, nil)
		return res, err
	case w.step.Shadow():
		return p.shadowed(ctx, req, ro, w, call, log)
	}
	var rec rollout.Record
	record := func(c *hostcalls.Calls) { c.Record = rec.Add }
	counter, which := &w.live, "live"
	var v *version
	if rollout.Candidate(req.Namespace, req.Name, w.step.Share) {
		counter, which, v = &w.cand, "candidate", ro.cand
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.Version.String(which))
	}
	res, ran, err := p.run(ctx, req, call, v, true, log, record)
	if v != nil && ran != v {
		return res, err // rolled back under it: it ran on the live version
	}
	o := outcomeOf(res, err, &rec)
	counter.Add(o)
	p.countRollout(which, o)
	return res, err
}

// shadowed runs a reconcile on the live version while the candidate runs it too, from the same
// cache at the same time, its writes sent with dryRun=All, and compares the two. The live
// version's result is the reconcile's. The worker waits for the shadow as long as the live
// reconcile took again (100ms at least), so that a slow candidate does not hold the live
// version back for long; a shadow still running then holds its token, and a key that finds no
// token free is reconciled by the live version alone and counted as skipped.
func (p *Plugin) shadowed(ctx context.Context, req reconcile.Request, ro *rollingOut, w *window, call abi.Request, log logr.Logger) (abi.Result, error) {
	select {
	case ro.shadows <- struct{}{}:
	default:
		w.diffs.Skip()
		res, _, err := p.run(ctx, req, call, nil, true, log, nil)
		return res, err
	}
	type ended struct {
		res abi.Result
		err error
		rec rollout.Record
	}
	liveDone, compared := make(chan ended, 1), make(chan struct{})
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ReconcileTimeout())
	// The shadow's own span, beside the live version's reconcile in the same trace.
	sctx, span := tracing.Begin(sctx, "shadow reconcile")
	if span.IsRecording() {
		span.SetAttributes(tracing.Version.String("candidate"))
	}
	p.shadowing.Add(1) // from a worker: the controller has not stopped (see Start)
	go func() {
		defer p.shadowing.Done()
		defer close(compared)
		defer func() { <-ro.shadows }()
		defer cancel()
		defer span.End()
		var s ended
		s.res, _, s.err = p.run(sctx, req, call, ro.cand, false, log.WithValues("shadow", true),
			func(c *hostcalls.Calls) { c.DryRun, c.Record = true, s.rec.Add })
		l := <-liveDone
		if errors.Is(s.err, wasm.ErrClosed) || p.ro.Load() != ro {
			return // rolled back, promoted or aborted under it
		}
		if errors.Is(l.err, wasm.ErrNotRun) {
			return // the live version did not run: nothing to compare with
		}
		p.compare(req, ro, w, l.res, l.err, &l.rec, s.res, s.err, &s.rec)
	}()
	start := time.Now()
	var l ended
	l.res, _, l.err = p.run(ctx, req, call, nil, true, log, func(c *hostcalls.Calls) { c.Record = l.rec.Add })
	liveDone <- l
	t := time.NewTimer(max(time.Since(start), 100*time.Millisecond))
	defer t.Stop()
	select {
	case <-compared:
	case <-t.C:
	}
	return l.res, l.err
}

// compare counts a shadowed reconcile: both versions' outcomes, and whether they differ.
func (p *Plugin) compare(req reconcile.Request, ro *rollingOut, w *window, lres abi.Result, lerr error, lrec *rollout.Record, sres abi.Result, serr error, srec *rollout.Record) {
	lo, so := outcomeOf(lres, lerr, lrec), outcomeOf(sres, serr, srec)
	writes, result, diff := rollout.Compare(lrec, srec, resultOf(lres, lerr), resultOf(sres, serr))
	w.live.Add(lo)
	w.cand.Add(so)
	w.diffs.Add(writes, result)
	p.countRollout("live", lo)
	p.countRollout("candidate", so)
	if m := p.host.metrics; m != nil {
		m.ShadowDifferences.WithLabelValues(p.cfg.Name, "compared").Inc()
		if writes {
			m.ShadowDifferences.WithLabelValues(p.cfg.Name, "writes").Inc()
		}
		if result {
			m.ShadowDifferences.WithLabelValues(p.cfg.Name, "result").Inc()
		}
	}
	if writes {
		ro.sample.Do(func() {
			p.log.Info("rollout: the new version's shadow wrote differently from the live version (a sample: at most one such line every 10s)",
				"request", req.String(), "candidate", ro.cand.mod.ShortDigest(), "diff", diff)
		})
	}
}

func (p *Plugin) countRollout(version string, o rollout.Outcome) {
	m := p.host.metrics
	if m == nil {
		return
	}
	outcome := "ok"
	switch {
	case o.Panicked:
		outcome = "panic"
	case o.TimedOut:
		outcome = "timeout"
	case o.Failed:
		outcome = "error"
	}
	m.RolloutReconciles.WithLabelValues(p.cfg.Name, version, outcome).Inc()
}

func outcomeOf(res abi.Result, err error, rec *rollout.Record) rollout.Outcome {
	return rollout.Outcome{
		Failed:   err != nil || res.Failed,
		Panicked: errors.Is(err, wasm.ErrTrapped),
		TimedOut: errors.Is(err, wasm.ErrTimedOut),
		Writes:   len(rec.Writes),
		Refused:  rec.Refused,
	}
}

func resultOf(res abi.Result, err error) rollout.Result {
	return rollout.Result{Failed: err != nil || res.Failed, Requeue: res.Requeue, RequeueAfter: res.RequeueAfter}
}
