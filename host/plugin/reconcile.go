package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin/internal/hostcalls"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/tracing"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// guestAPI builds what the plugin's host calls share: its identity's clients and its limits,
// from its config or the defaults.
func (p *Plugin) guestAPI() *hostcalls.API {
	cfg, h := p.cfg, p.host
	limit := func(field string, c CallLimit, qps float64, burst int, waits, seconds *prometheus.CounterVec) *hostcalls.Limit {
		if c.QPS > 0 {
			qps = c.QPS
		}
		if c.Burst > 0 {
			burst = c.Burst
		}
		if waits == nil {
			return hostcalls.NewLimit(field, qps, burst, nil, nil)
		}
		return hostcalls.NewLimit(field, qps, burst, waits.WithLabelValues(cfg.Name), seconds.WithLabelValues(cfg.Name))
	}
	var (
		count                        func(string, abi.Status)
		wWaits, wSecs, rWaits, rSecs *prometheus.CounterVec
	)
	if m := h.metrics; m != nil {
		wWaits, wSecs, rWaits, rSecs = m.WriteLimitWaits, m.WriteLimitWaitSeconds, m.ReadLimitWaits, m.ReadLimitWaitSeconds
		count = func(fn string, s abi.Status) { m.HostCalls.WithLabelValues(cfg.Name, fn, s.String()).Inc() }
	}
	return (&hostcalls.API{
		Name:      cfg.Name,
		For:       p.forGVK,
		Mapper:    h.mapper,
		KnownKind: h.knownKind,
		Objects:   p.identity.objects,
		Recorder:  p.identity.recorder(h, cfg.Name),
		Reader:    p.reader,
		Writes:    limit("writes", cfg.Writes, DefaultWriteQPS, DefaultWriteBurst, wWaits, wSecs),
		Reads:     limit("reads", cfg.Reads, DefaultReadQPS, DefaultReadBurst, rWaits, rSecs),
		Log:       p.log,
		Count:     count,
		Owned:     p.owned,
		MayRead:   p.identity.mayRead(),
	}).Init()
}

func (p *Plugin) stats() metrics.PluginStats {
	mod := p.Module()
	s := mod.Stats()
	_, mem := mod.Instances()
	ps := metrics.PluginStats{
		Digest: mod.Digest(), Instances: int(s.Live), InstanceMemoryBytes: mem, SnapshotBytes: s.SnapshotBytes,
		Traps: s.Traps, Timeouts: s.Timeouts, BadResults: s.BadResults,
		Instantiated: s.Instantiated, Discarded: s.Discarded, Rec: s.Recycled,
		LogDroppedLines: s.LogDroppedLines, LogDroppedBytes: s.LogDroppedBytes,
		IndexBytes: int64(p.current.Load().index.Bytes()), IndexRefusals: p.indexRefusals.Load(),
	}
	if r := p.rec; r != nil {
		ps.Records = true
		ps.Recordings, ps.RecordingsDropped, ps.RecordingsBytes = r.store.Written(), r.store.Dropped(), r.store.Bytes()
	}
	return ps
}

// owned reports whether this replica may act for the plugin now: always, unless it shares
// plugins and its hold on the plugin's units has gone stale (see ownership.Claim.Fresh).
func (p *Plugin) owned() bool { return p.share.fresh() }

// Reconcile runs one reconcile in the plugin.
func (p *Plugin) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !p.owned() {
		// The controller is being stopped: the unit is another replica's, or about to be.
		p.log.V(1).Info("not reconciling: this replica's Lease on the plugin went unrenewed past the renew deadline", "request", req.String())
		return reconcile.Result{}, nil
	}
	id := fmt.Sprintf("%s-%d", p.cfg.Name, p.ids.Add(1))
	if p.rec != nil {
		ctx = context.WithValue(ctx, reconcileIDKey{}, id)
	}
	log := p.log.WithValues(append([]any{"request", req.String(), "reconcileID", id}, tracing.LogValues(ctx)...)...)
	var (
		res abi.Result
		err error
	)
	if !p.interruptible() { // the timeout cannot stop the guest: say so when it passes
		stop := context.AfterFunc(ctx, func() {
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				log.Info("reconcile running past its timeout: the plugin is not interruptible, so it holds its worker until the guest returns", "timeout", p.cfg.ReconcileTimeout())
			}
		})
		defer stop()
	}
	call := abi.Request{Namespace: req.Namespace, Name: req.Name, Retries: uint32(controller.Retries(ctx))}
	var ran *version // the version the reconcile ran on, if one
	if ro := p.ro.Load(); ro != nil {
		res, err = p.reconcileRolling(ctx, req, ro, call, log)
	} else {
		res, ran, err = p.run(ctx, req, call, nil, true, log, nil)
	}
	switch {
	case errors.Is(err, wasm.ErrNotRun):
		// It waited for a CPU slot or an instance past its Lease's renew deadline (a paused
		// process): the unit is another replica's, or about to be.
		log.V(1).Info("not reconciling: this replica's Lease on the plugin went unrenewed past the renew deadline while the reconcile waited to run")
		return reconcile.Result{}, nil
	case errors.Is(err, wasm.ErrTimedOut):
		err = &timedOut{plugin: p.cfg.Name, timeout: p.cfg.ReconcileTimeout(), err: err}
	case err != nil:
	case res.Failed && res.Terminal:
		err = reconcile.TerminalError(fmt.Errorf("plugin %q: %s", p.cfg.Name, clip(res.Err)))
	case res.Failed:
		err = fmt.Errorf("plugin %q: %s", p.cfg.Name, clip(res.Err))
	}
	p.failures.record(err, p.onFailing)
	if err != nil {
		values := []any{"reconcileID", id}
		if ran != nil {
			values = append(values, "digest", ran.mod.ShortDigest())
		}
		return reconcile.Result{}, &reconcileError{err: err, values: values}
	}
	return reconcile.Result{Requeue: res.Requeue, RequeueAfter: res.RequeueAfter}, nil
}

// reconcileError is a reconcile's error with the key/values that name the reconcile in the
// plugin's own log lines (reconcileID, digest), for the controller's "reconciler error" line.
type reconcileError struct {
	err    error
	values []any
}

func (e *reconcileError) Error() string    { return e.err.Error() }
func (e *reconcileError) Unwrap() error    { return e.err }
func (e *reconcileError) LogValues() []any { return e.values }

// timedOut is a reconcile (or a map) the host stopped at the plugin's timeout, said in the terms
// of the setting an author or operator changes, with where the guest was as its stack. It wraps
// what the module reported (wasm.ErrTimedOut) and context.DeadlineExceeded, so that the
// controller does not say it again.
type timedOut struct {
	plugin  string
	timeout time.Duration
	isMap   bool
	err     error
}

func (e *timedOut) Error() string {
	if e.isMap {
		return fmt.Sprintf("plugin %q: its map function did not return within %s, the plugin's timeout (timeout in host.yaml, spec.timeout of its Plugin or ClusterPlugin), and was stopped: keep a map to a few reads, or raise the timeout",
			e.plugin, e.timeout)
	}
	return fmt.Sprintf("plugin %q: reconcile timed out after %s, the plugin's timeout (timeout in host.yaml, spec.timeout of its Plugin or ClusterPlugin), and was stopped: make the reconcile return sooner, or raise the timeout",
		e.plugin, e.timeout)
}

// Stack is the guest's stack where it was stopped (the wasm stack trace of the interruption,
// innermost call first, as wazero writes it), "" if there is none: what a loop that did not end
// was doing.
func (e *timedOut) Stack() string {
	_, stack, ok := strings.Cut(e.err.Error(), "wasm stack trace:\n")
	if !ok {
		return ""
	}
	return strings.ReplaceAll(strings.TrimSpace(stack), "\n\t", "\n")
}

func (e *timedOut) Unwrap() []error { return []error{e.err, context.DeadlineExceeded} }

// run runs one reconcile on version v (nil: the live one), its host calls set up by calls if
// set. A reconcile runs whole on one version: one that picked a version just as a swap or a
// rollback closed it runs on the live version instead if fallback is set (a shadow run does
// not), and run returns the version it ran on.
func (p *Plugin) run(ctx context.Context, req reconcile.Request, call abi.Request, v *version, fallback bool, log logr.Logger, calls func(*hostcalls.Calls)) (abi.Result, *version, error) {
	for {
		cur := v
		if cur == nil {
			cur = p.current.Load()
		}
		c := &hostcalls.Calls{API: p.api, Policy: cur.policy, Index: cur.index, Req: req}
		if calls != nil {
			calls(c)
		}
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(tracing.Digest.String(cur.mod.Digest()))
		}
		started := time.Now()
		wc := &wasm.Call{Request: call, Host: c, Logger: log.WithValues("digest", cur.mod.ShortDigest())}
		if fallback { // not a shadow run: once it has waited for a CPU slot and an instance, it runs only if the replica still holds the plugin
			wc.MayRun = p.owned
		}
		res, err := cur.mod.Reconcile(ctx, wc)
		if p.rec != nil && fallback { // not a shadow run: what the plugin did
			p.rec.keep(ctx, p.cfg.Name, cur.mod, wc, started, err != nil || res.Failed)
		}
		switch {
		case !errors.Is(err, wasm.ErrClosed), !fallback:
			return res, cur, err
		case v != nil:
			v = nil // the candidate was dropped: the live version
		case p.Module() == cur.mod:
			return res, cur, err
		}
	}
}

// clip is msg, cut to maxErrorText bytes (at a rune boundary), saying how much was cut.
func clip(msg string) string {
	if len(msg) <= maxErrorText {
		return msg
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes more)", msg[:cut], len(msg)-cut)
}
