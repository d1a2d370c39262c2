package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/codes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
	"github.com/wasmrec/wasmrec/host/tracing"
)

// Options configure a Controller. The zero value is ready to use.
type Options struct {
	// MaxConcurrentReconciles is the number of workers. Defaults to 1.
	MaxConcurrentReconciles int

	// RateLimiter paces retries. Defaults to a fresh DefaultRateLimiter on each Start.
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]

	// ReconcileTimeout bounds one Reconcile call: its context is cancelled after this long and a
	// call that overran counts as an error: the reconciler's own if it wraps
	// context.DeadlineExceeded (it says what timed out), else "reconcile timed out after ...".
	// Defaults to 0, no timeout.
	ReconcileTimeout time.Duration

	// CacheSyncTimeout bounds how long Start waits for the sources' first lists.
	// Defaults to 2 minutes.
	CacheSyncTimeout time.Duration

	// NeedLeaderElection says whether the manager runs the controller only on the leader.
	// Defaults to true.
	NeedLeaderElection *bool

	// Clock drives the queue's delays and the default rate limiter. Defaults to the real clock.
	Clock clock.WithTicker

	// Logger defaults to logr.Discard().
	Logger logr.Logger

	// Observe, if set, is called after each Reconcile with its outcome. It runs on the worker:
	// keep it cheap.
	Observe func(req reconcile.Request, res reconcile.Result, err error, took time.Duration)

	// LogError, if set, says whether a reconciler error is logged: a plugin's errors are its
	// output, within its log limit. The error is retried, counted and observed either way.
	// Defaults to logging every error.
	LogError func(err error) bool
	// Recorder, if set, receives what the workers do (host/metrics implements it).
	Recorder Recorder

	// QueueMetrics, if set, receives the queue's workqueue_* metrics, labelled with the
	// controller's name.
	QueueMetrics workqueue.MetricsProvider
}

// Recorder receives a controller's activity, for metrics.
type Recorder interface {
	SetMaxWorkers(n int)
	WorkerStarted()
	WorkerFinished()
	// Reconciled reports one reconcile: result is "success", "error", "requeue" or
	// "requeue_after", as controller-runtime labels them.
	Reconciled(result string, terminal, panicked bool, took time.Duration)
}

func (o Options) withDefaults() Options {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 1
	}
	if o.CacheSyncTimeout <= 0 {
		o.CacheSyncTimeout = 2 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.NeedLeaderElection == nil {
		t := true
		o.NeedLeaderElection = &t
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

// Controller feeds Requests from its sources through a rate-limited queue to a Reconciler. It
// is a manager Runnable; it can be stopped (its Start context cancelled) and started again,
// each run with a fresh queue.
//
// Its locks: mu guards sources and run, and is held while Watch starts a source (which may
// create an informer); inFlightMu guards inFlight, which every reconcile writes as it starts and
// ends. They are apart so that reconciles never wait on a source being started or stopped; no
// path takes one while holding the other.
type Controller struct {
	name string
	do   reconcile.Reconciler
	opts Options

	mu      sync.Mutex
	sources []source.Source
	run     *run // nil while not running

	inFlightMu sync.Mutex
	inFlight   map[reconcile.Request]time.Time // reconciles running, since when
}

// run is the state of one Start.
type run struct {
	ctx   context.Context
	queue handler.Queue
}

// New returns a controller named name (names appear in logs and metrics; keep them unique).
func New(name string, r reconcile.Reconciler, opts Options) (*Controller, error) {
	if name == "" {
		return nil, errors.New("controller: a name is required")
	}
	if r == nil {
		return nil, fmt.Errorf("controller %q: a reconciler is required", name)
	}
	opts = opts.withDefaults()
	opts.Logger = opts.Logger.WithValues("controller", name)
	return &Controller{name: name, do: r, opts: opts}, nil
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// NeedLeaderElection tells the manager which group the controller belongs to.
func (c *Controller) NeedLeaderElection() bool { return *c.opts.NeedLeaderElection }

// Watch adds a source. Before Start it is started with the controller; on a running
// controller it starts at once.
func (c *Controller) Watch(src source.Source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run != nil {
		if err := src.Start(c.run.ctx, c.run.queue); err != nil {
			return fmt.Errorf("controller %q: starting %s: %w", c.name, src, err)
		}
	}
	c.sources = append(c.sources, src)
	return nil
}

// Unwatch stops a source and forgets it; its informer is released.
func (c *Controller) Unwatch(src source.Source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.sources, src)
	if i < 0 {
		return fmt.Errorf("controller %q: %s is not watched", c.name, src)
	}
	c.sources = slices.Delete(c.sources, i, i+1)
	if c.run != nil {
		return src.Stop()
	}
	return nil
}

// Enqueue adds requests to the running controller's queue (nothing happens while it is not
// running: it lists everything when it starts).
func (c *Controller) Enqueue(reqs ...reconcile.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil {
		return
	}
	for _, r := range reqs {
		c.run.queue.Add(r)
	}
}

// Start runs the controller until ctx is done: it starts the sources, waits for their first
// lists, then runs the workers. On return no worker or source of this run is left running.
func (c *Controller) Start(ctx context.Context) error {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(c.rateLimiter(), workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{
		Name:            c.name,
		Clock:           c.opts.Clock,
		MetricsProvider: c.opts.QueueMetrics,
	})
	defer queue.ShutDown()

	c.mu.Lock()
	if c.run != nil {
		c.mu.Unlock()
		return fmt.Errorf("controller %q: already running", c.name)
	}
	c.run = &run{ctx: ctx, queue: queue}
	sources := append([]source.Source(nil), c.sources...)
	var err error
	for _, src := range sources {
		if err = src.Start(ctx, queue); err != nil {
			err = fmt.Errorf("controller %q: starting %s: %w", c.name, src, err)
			break
		}
	}
	c.mu.Unlock()
	defer c.stopSources()
	if err != nil {
		return err
	}

	syncCtx, cancel := context.WithTimeout(ctx, c.opts.CacheSyncTimeout)
	defer cancel()
	for _, src := range sources {
		if err := src.WaitForSync(syncCtx); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while syncing: not an error
			}
			return fmt.Errorf("controller %q: waiting for %s to sync (timeout %s): %w", c.name, src, c.opts.CacheSyncTimeout, err)
		}
	}

	c.opts.Logger.Info("starting workers", "workers", c.opts.MaxConcurrentReconciles)
	if c.opts.Recorder != nil {
		c.opts.Recorder.SetMaxWorkers(c.opts.MaxConcurrentReconciles)
	}
	var wg sync.WaitGroup
	for range c.opts.MaxConcurrentReconciles {
		wg.Go(func() {
			for c.processNextWorkItem(ctx, queue) {
			}
		})
	}
	<-ctx.Done()
	// Queued keys are dropped, not drained: the world is level-triggered, and the next start
	// (or the next leader) lists every object again.
	c.opts.Logger.Info("stopping workers; in-flight reconciles finish first", "inFlight", len(c.InFlight()), "reconcileTimeout", c.opts.ReconcileTimeout, "droppedQueuedKeys", queue.Len())
	queue.ShutDown()
	wg.Wait()
	return nil
}

// InFlight is a reconcile running now.
type InFlight struct {
	Request reconcile.Request
	Since   time.Time
}

// InFlight lists the reconciles running now, oldest first.
func (c *Controller) InFlight() []InFlight {
	c.inFlightMu.Lock()
	defer c.inFlightMu.Unlock()
	out := make([]InFlight, 0, len(c.inFlight))
	for r, t := range c.inFlight {
		out = append(out, InFlight{Request: r, Since: t})
	}
	slices.SortFunc(out, func(a, b InFlight) int { return a.Since.Compare(b.Since) })
	return out
}

// stopSources stops every source and ends the run.
func (c *Controller) stopSources() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, src := range c.sources {
		if err := src.Stop(); err != nil {
			c.opts.Logger.Error(err, "stopping source", "source", src.String())
		}
	}
	c.run = nil
}

func (c *Controller) rateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	if c.opts.RateLimiter != nil {
		return c.opts.RateLimiter
	}
	return DefaultRateLimiter(c.opts.Clock)
}

// processNextWorkItem handles one Request. It returns false only when the controller stops (the
// queue has shut down, or ctx is done: a stopping controller takes no more keys from its queue);
// a failed reconcile never ends the worker loop (no restart delay between retries).
func (c *Controller) processNextWorkItem(ctx context.Context, q handler.Queue) bool {
	req, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(req)
	if ctx.Err() != nil {
		return false
	}
	c.reconcileHandler(ctx, q, req)
	return true
}

// reconcileHandler calls the reconciler and applies the outcome to the queue.
func (c *Controller) reconcileHandler(ctx context.Context, q handler.Queue, req reconcile.Request) {
	ctx, span := tracing.Begin(ctx, "reconcile")
	defer span.End()
	log := c.opts.Logger.WithValues("namespace", req.Namespace, "name", req.Name)
	if span.IsRecording() {
		span.SetAttributes(tracing.Controller.String(c.name), tracing.Key.String(req.String()))
		log = log.WithValues(tracing.LogValues(ctx)...)
	}
	start := c.opts.Clock.Now()
	ctx = context.WithValue(logr.NewContext(ctx, log), retriesKey{}, q.NumRequeues(req))
	if c.opts.Recorder != nil {
		c.opts.Recorder.WorkerStarted()
		defer c.opts.Recorder.WorkerFinished()
	}
	c.inFlightMu.Lock()
	if c.inFlight == nil {
		c.inFlight = map[reconcile.Request]time.Time{}
	}
	c.inFlight[req] = start
	c.inFlightMu.Unlock()
	debug := log.V(1) // the per-reconcile lines cost nothing unless -v 1 asks for them
	if debug.Enabled() {
		debug.Info("reconcile start", "retries", q.NumRequeues(req))
	}
	res, panicked, err := c.reconcile(ctx, req)
	c.inFlightMu.Lock()
	delete(c.inFlight, req)
	c.inFlightMu.Unlock()
	took := c.opts.Clock.Since(start)
	if c.opts.Observe != nil {
		c.opts.Observe(req, res, err, took)
	}
	var result string
	terminal := err != nil && reconcile.IsTerminal(err)
	switch {
	case terminal:
		result = "error"
		q.Forget(req)
		if c.opts.LogError == nil || c.opts.LogError(err) {
			log.Error(err, "reconciler error: terminal, not retried", reconcile.LogValuesOf(err)...)
		}
	case err != nil:
		result = "error"
		// Log before requeueing, so the log's order is the order of events: the retry's delay
		// starts after this line.
		if c.opts.LogError == nil || c.opts.LogError(err) {
			log.Error(err, "reconciler error", append([]any{"retries", q.NumRequeues(req) + 1}, reconcile.LogValuesOf(err)...)...)
		}
		q.AddRateLimited(req)
	case res.RequeueAfter > 0:
		result = "requeue_after"
		q.Forget(req)
		q.AddAfter(req, res.RequeueAfter)
	case res.Requeue:
		result = "requeue"
		q.AddRateLimited(req)
	default:
		result = "success"
		q.Forget(req)
	}
	if span.IsRecording() {
		span.SetAttributes(tracing.Result.String(result))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	if debug.Enabled() {
		debug.Info("reconcile end", "result", result, "took", took.String())
	}
	if c.opts.Recorder != nil {
		c.opts.Recorder.Reconciled(result, terminal, panicked, took)
	}
}

// reconcile calls the reconciler with the per-reconcile timeout, turning a panic or an overrun
// into an error. An in-flight reconcile is not cancelled when the controller stops: it
// finishes, within the manager's graceful-shutdown timeout, and reconcile.Stopping tells it
// the host waits for it.
func (c *Controller) reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, panicked bool, err error) {
	ctx = reconcile.WithStopping(context.WithoutCancel(ctx), ctx.Done())
	if c.opts.ReconcileTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.ReconcileTimeout)
		defer cancel()
	}
	defer func() {
		if r := recover(); r != nil {
			res, panicked, err = reconcile.Result{}, true, fmt.Errorf("panic in reconciler: %v [recovered]\n%s", r, debug.Stack())
		}
	}()
	res, err = c.do.Reconcile(ctx, req)
	if c.opts.ReconcileTimeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if errors.Is(err, context.DeadlineExceeded) {
			return reconcile.Result{}, false, err // the reconciler said what timed out
		}
		return reconcile.Result{}, false, fmt.Errorf("reconcile timed out after %s: %w", c.opts.ReconcileTimeout, errors.Join(context.DeadlineExceeded, err))
	}
	return res, false, err
}

func newQueue(rl workqueue.TypedRateLimiter[reconcile.Request], clk clock.WithTicker) handler.Queue {
	return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clk})
}

type retriesKey struct{}

// Retries returns, inside Reconcile, how many times in a row the request has failed before.
func Retries(ctx context.Context) int {
	n, _ := ctx.Value(retriesKey{}).(int)
	return n
}
