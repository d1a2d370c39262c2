package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/reconcile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

// queueSource is a source a test drives by hand: it hands out the running queue.
type queueSource struct {
	mu      sync.Mutex
	q       handler.Queue
	initial []reconcile.Request
	started chan struct{}
}

func newQueueSource(initial ...reconcile.Request) *queueSource {
	return &queueSource{initial: initial, started: make(chan struct{})}
}

func (s *queueSource) Start(_ context.Context, q handler.Queue) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.q = q
	for _, r := range s.initial {
		q.Add(r)
	}
	close(s.started)
	return nil
}
func (s *queueSource) WaitForSync(context.Context) error { return nil }
func (s *queueSource) Stop() error                       { return nil }
func (s *queueSource) String() string                    { return "test source" }
func (s *queueSource) queue() handler.Queue {
	<-s.started
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q
}

// startController runs c until the test ends and waits for Start to return.
func startController(t *testing.T, c *Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// quietClock is a fake clock whose tickers never tick. The delaying queue's only ticker is a
// 10s heartbeat that re-checks for ready items; on a fake clock it can wake the queue while the
// test steps the clock, and make it arm its timer from a stale "now". Without it, the only
// waiter on the clock is the timer for the next ready item, and every step is deterministic.
type quietClock struct{ *clocktesting.FakeClock }

func (quietClock) NewTicker(time.Duration) clock.Ticker { return silentTicker{} }

type silentTicker struct{}

func (silentTicker) C() <-chan time.Time { return nil }
func (silentTicker) Stop()               {}

func newQuietClock() quietClock {
	return quietClock{clocktesting.NewFakeClock(time.Unix(1_000_000, 0))}
}

// stepper drives a controller on a fake clock and checks the exact fake time of each reconcile.
type stepper struct {
	t     *testing.T
	clock quietClock
	seen  chan time.Time // fake time of each reconcile
}

// expectAfter checks that the next reconcile happens exactly d after the previous one: not at
// d-1ms, and at d.
func (s *stepper) expectAfter(prev time.Time, d time.Duration) time.Time {
	s.t.Helper()
	// The retry is scheduled once the delaying queue holds a timer.
	waitFor(s.t, fmt.Sprintf("a retry timer (%s)", d), func() bool { return s.clock.Waiters() == 1 })
	s.clock.Step(d - time.Millisecond)
	if s.clock.Waiters() != 1 {
		s.t.Fatalf("the retry timer fired %s after the previous reconcile, want %s", d-time.Millisecond, d)
	}
	select {
	case at := <-s.seen:
		s.t.Fatalf("reconciled %s after the previous one, want %s", at.Sub(prev), d)
	default:
	}
	s.clock.Step(time.Millisecond)
	select {
	case at := <-s.seen:
		if got := at.Sub(prev); got != d {
			s.t.Fatalf("reconciled %s after the previous one, want %s", got, d)
		}
		return at
	case <-time.After(10 * time.Second):
		s.t.Fatalf("no reconcile %s after the previous one", d)
	}
	return time.Time{}
}

// A failing key follows 5ms * 2^n exactly, capped at 1000s: no 1s worker-restart plateau.
func TestFailingKeyFollowsExponentialSchedule(t *testing.T) {
	fc := newQuietClock()
	s := &stepper{t: t, clock: fc, seen: make(chan time.Time, 100)}
	c, err := New("failing", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		s.seen <- fc.Now()
		return reconcile.Result{}, errors.New("always fails")
	}), Options{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(newQueueSource(req("a"))); err != nil {
		t.Fatal(err)
	}
	startController(t, c)

	prev := <-s.seen
	for n := range 22 {
		want := DefaultMaxDelay
		if n < 18 { // 5ms * 2^18 = 1310.72s is past the cap
			want = DefaultBaseDelay << n
		}
		prev = s.expectAfter(prev, want)
	}
}

func TestDefaultRateLimiterSchedule(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	rl := DefaultRateLimiter(fc)
	a := req("a")
	for n := range 25 {
		want := min(DefaultBaseDelay<<n, DefaultMaxDelay)
		if got := rl.When(a); got != want {
			t.Fatalf("failure %d: When = %s, want %s", n+1, got, want)
		}
	}
	if got := rl.NumRequeues(a); got != 25 {
		t.Fatalf("NumRequeues = %d, want 25", got)
	}
	rl.Forget(a)
	if got := rl.When(a); got != DefaultBaseDelay {
		t.Fatalf("after Forget: When = %s, want %s", got, DefaultBaseDelay)
	}
}

// The overall bucket lets 100 keys through at once (the burst less the one token key "a" above
// would have used is not shared here: fresh limiter), then spaces keys 100ms apart (10 qps).
func TestDefaultRateLimiterBucket(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	rl := DefaultRateLimiter(fc)
	for i := range DefaultBurst {
		if got := rl.When(req(fmt.Sprint("k", i))); got != DefaultBaseDelay {
			t.Fatalf("key %d of the burst: When = %s, want %s", i, got, DefaultBaseDelay)
		}
	}
	for i := 1; i <= 5; i++ {
		want := time.Duration(i) * 100 * time.Millisecond
		if got := rl.When(req(fmt.Sprint("over", i))); got != want {
			t.Fatalf("key %d past the burst: When = %s, want %s", i, got, want)
		}
	}
	// 10 s refills 100 tokens: the 5 borrowed are repaid and 95 are free again.
	fc.Step(10 * time.Second)
	if got := rl.When(req("later")); got != DefaultBaseDelay {
		t.Fatalf("after refilling: When = %s, want %s", got, DefaultBaseDelay)
	}
}

// recordingQueue is the real queue with the calls the controller makes written down.
type recordingQueue struct {
	handler.Queue
	mu    sync.Mutex
	calls []string
}

func (q *recordingQueue) record(s string) { q.mu.Lock(); q.calls = append(q.calls, s); q.mu.Unlock() }
func (q *recordingQueue) AddRateLimited(r reconcile.Request) {
	q.record("AddRateLimited")
	q.Queue.AddRateLimited(r)
}
func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.record("AddAfter " + d.String())
	q.Queue.AddAfter(r, d)
}
func (q *recordingQueue) Forget(r reconcile.Request) { q.record("Forget"); q.Queue.Forget(r) }

func TestResultSemantics(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		res   reconcile.Result
		err   error
		panic bool
		want  []string
	}{
		{name: "success", want: []string{"Forget"}},
		{name: "error", err: boom, want: []string{"AddRateLimited"}},
		{name: "error wins over requeueAfter", res: reconcile.Result{RequeueAfter: time.Minute}, err: boom, want: []string{"AddRateLimited"}},
		{name: "error wins over requeue", res: reconcile.Result{Requeue: true}, err: boom, want: []string{"AddRateLimited"}},
		{name: "terminal error", err: reconcile.TerminalError(boom), want: []string{"Forget"}},
		{name: "wrapped terminal error", err: fmt.Errorf("ctx: %w", reconcile.TerminalError(boom)), want: []string{"Forget"}},
		{name: "requeueAfter", res: reconcile.Result{RequeueAfter: 30 * time.Second}, want: []string{"Forget", "AddAfter 30s"}},
		{name: "requeueAfter wins over requeue", res: reconcile.Result{Requeue: true, RequeueAfter: time.Second}, want: []string{"Forget", "AddAfter 1s"}},
		{name: "requeue", res: reconcile.Result{Requeue: true}, want: []string{"AddRateLimited"}},
		{name: "panic", panic: true, want: []string{"AddRateLimited"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotErr error
			c, err := New("semantics", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
				if tc.panic {
					panic("guest bug")
				}
				return tc.res, tc.err
			}), Options{Observe: func(_ reconcile.Request, _ reconcile.Result, err error, _ time.Duration) { gotErr = err }})
			if err != nil {
				t.Fatal(err)
			}
			fc := clocktesting.NewFakeClock(time.Now())
			q := &recordingQueue{Queue: newQueue(DefaultRateLimiter(fc), fc)}
			defer q.ShutDown()
			c.reconcileHandler(context.Background(), q, req("a"))
			if fmt.Sprint(q.calls) != fmt.Sprint(tc.want) {
				t.Fatalf("queue calls = %v, want %v", q.calls, tc.want)
			}
			if tc.panic && (gotErr == nil || !strings.Contains(gotErr.Error(), "panic in reconciler") || !strings.Contains(gotErr.Error(), "guest bug")) {
				t.Fatalf("panic surfaced as %v, want an error naming the panic", gotErr)
			}
		})
	}
}

// RequeueAfter forgets the failures before it: the next error starts again at 5ms. Requeue
// backs off like an error.
func TestRequeueAfterResetsBackoff(t *testing.T) {
	fc := newQuietClock()
	s := &stepper{t: t, clock: fc, seen: make(chan time.Time, 100)}
	script := []struct {
		res reconcile.Result
		err error
	}{
		{err: errors.New("1")},
		{err: errors.New("2")},
		{res: reconcile.Result{Requeue: true}},
		{res: reconcile.Result{RequeueAfter: 30 * time.Second}},
		{err: errors.New("3")},
		{},
	}
	var n atomic.Int32
	c, err := New("script", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		i := int(n.Add(1)) - 1 // counted before the test hears of it: it reads n once it has
		s.seen <- fc.Now()
		if i >= len(script) {
			t.Errorf("reconcile %d: the script is over: a zero Result must not requeue", i)
			return reconcile.Result{}, nil
		}
		return script[i].res, script[i].err
	}), Options{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(newQueueSource(req("a"))); err != nil {
		t.Fatal(err)
	}
	startController(t, c)
	prev := <-s.seen
	for _, d := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Second, 5 * time.Millisecond} {
		prev = s.expectAfter(prev, d)
	}
	// The last result is zero: no timer is armed, so nothing can come back however long we wait.
	if w := fc.Waiters(); w != 0 {
		t.Fatalf("%d timers armed after a zero Result, want none", w)
	}
	fc.Step(2000 * time.Second)
	if got := n.Load(); got != int32(len(script)) {
		t.Fatalf("reconciled %d times, want %d", got, len(script))
	}
}

func TestReconcileTimeoutIsAnError(t *testing.T) {
	c, err := New("slow", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		<-ctx.Done()
		return reconcile.Result{}, nil
	}), Options{ReconcileTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.reconcile(context.Background(), req("a"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
}

// A reconciler's own timeout error, which says what timed out, is the error as it is.
func TestReconcileTimeoutExplainedByTheReconciler(t *testing.T) {
	own := fmt.Errorf("the guest ran past its 10ms timeout: %w", context.DeadlineExceeded)
	c, err := New("slow", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		<-ctx.Done()
		return reconcile.Result{}, own
	}), Options{ReconcileTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err = c.reconcile(context.Background(), req("a")); err != own {
		t.Fatalf("err = %v, want the reconciler's own", err)
	}
}

type stackError struct{}

func (stackError) Error() string { return "it panicked" }
func (stackError) Stack() string { return "goroutine 1 [running]:\nmain.reconcile()" }

// valuesError carries key/values for its log line, as a plugin's reconcile errors do.
type valuesError struct{ error }

func (e valuesError) Unwrap() error  { return e.error }
func (valuesError) LogValues() []any { return []any{"reconcileID", "p-7", "digest", "sha256:ab"} }

// An error with a stack of its own (a plugin's panic) is logged with the stack beside it, and
// one with key/values (reconcile.Valuer) with them.
func TestErrorStackIsLogged(t *testing.T) {
	log, logged := captureLog()
	src := newQueueSource(req("a"))
	var calls atomic.Int32
	c, err := New("stacky", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		if calls.Add(1) == 1 {
			return reconcile.Result{}, valuesError{fmt.Errorf("plugin %q: %w", "p", stackError{})}
		}
		return reconcile.Result{}, nil
	}), Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	c.Watch(src)
	startController(t, c)
	waitFor(t, "the retry", func() bool { return calls.Load() >= 2 })
	lines := logged()
	for _, l := range lines {
		if strings.Contains(l, "reconciler error") {
			if !strings.Contains(l, `"stack"="goroutine 1 [running]:\nmain.reconcile()"`) {
				t.Errorf("the error line lacks the stack: %s", l)
			}
			if !strings.Contains(l, `"reconcileID"="p-7" "digest"="sha256:ab"`) {
				t.Errorf("the error line lacks the error's key/values: %s", l)
			}
			return
		}
	}
	t.Fatalf("no error line in %q", lines)
}

// LogError decides which errors are logged; every one is retried all the same.
func TestLogErrorGatesErrorLines(t *testing.T) {
	log, logged := captureLog()
	src := newQueueSource(req("a"))
	var calls, asked atomic.Int32
	c, err := New("quiet", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		if calls.Add(1) <= 3 {
			return reconcile.Result{}, fmt.Errorf("failure %d", calls.Load())
		}
		return reconcile.Result{}, nil
	}), Options{Logger: log, LogError: func(err error) bool { return asked.Add(1) == 1 }})
	if err != nil {
		t.Fatal(err)
	}
	c.Watch(src)
	startController(t, c)
	waitFor(t, "the retries", func() bool { return calls.Load() >= 4 })
	var errs []string
	for _, l := range logged() {
		if strings.Contains(l, "reconciler error") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "failure 1") || asked.Load() != 3 {
		t.Errorf("asked %d times; logged %q; want 3 asked, the first logged", asked.Load(), errs)
	}
}

// captureLog is a logger that keeps its lines, and what it has kept so far.
func captureLog() (logr.Logger, func() []string) {
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	return log, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
}

// Eight workers, keys added from several goroutines while they are reconciled: one key is never
// reconciled by two workers at once, and every key is reconciled after its last change.
func TestHammerNoConcurrentSameKey(t *testing.T) {
	const (
		workers   = 8
		keys      = 32
		producers = 4
		adds      = 5000
	)
	var (
		inFlight   [keys]atomic.Int32
		version    [keys]atomic.Int64 // bumped before each Add
		seen       [keys]atomic.Int64 // the version a reconcile started after
		overlaps   atomic.Int32
		reconciles atomic.Int64
	)
	index := func(r reconcile.Request) int {
		var i int
		fmt.Sscanf(r.Name, "k%d", &i)
		return i
	}
	c, err := New("hammer", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		i := index(r)
		if inFlight[i].Add(1) != 1 {
			overlaps.Add(1)
		}
		seen[i].Store(version[i].Load())
		reconciles.Add(1)
		for range rand.IntN(50) {
			_ = fmt.Sprint(i) // a little work so workers overlap
		}
		inFlight[i].Add(-1)
		return reconcile.Result{}, nil
	}), Options{MaxConcurrentReconciles: workers})
	if err != nil {
		t.Fatal(err)
	}
	src := newQueueSource()
	if err := c.Watch(src); err != nil {
		t.Fatal(err)
	}
	startController(t, c)
	q := src.queue()

	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 1))
			for range adds {
				i := r.IntN(keys)
				version[i].Add(1)
				q.Add(req(fmt.Sprint("k", i)))
			}
		})
	}
	wg.Wait()
	waitFor(t, "every key reconciled after its last change", func() bool {
		for i := range keys {
			if seen[i].Load() != version[i].Load() {
				return false
			}
		}
		return true
	})
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("a key was reconciled concurrently %d times", n)
	}
	t.Logf("%d adds collapsed into %d reconciles", producers*adds, reconciles.Load())
}

func TestStartTwiceFails(t *testing.T) {
	c, err := New("twice", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := newQueueSource()
	if err := c.Watch(src); err != nil {
		t.Fatal(err)
	}
	startController(t, c)
	src.queue()
	if err := c.Start(context.Background()); err == nil {
		t.Fatal("a second Start of a running controller succeeded")
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New("", reconcile.Func(nil), Options{}); err == nil {
		t.Error("New accepted an empty name")
	}
	if _, err := New("x", nil, Options{}); err == nil {
		t.Error("New accepted a nil reconciler")
	}
}

// A stopping controller lets its in-flight reconciles finish and takes no more keys from its
// queue: the world is level-triggered, so the next start lists them again.
func TestStopDropsQueuedKeys(t *testing.T) {
	const workers, queued = 2, 100
	var (
		mu       sync.Mutex
		started  []string
		release  = make(chan struct{})
		inFlight = make(chan struct{}, queued)
	)
	c, err := New("stopping", reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		started = append(started, r.Name)
		mu.Unlock()
		inFlight <- struct{}{}
		<-release
		return reconcile.Result{}, nil
	}), Options{MaxConcurrentReconciles: workers})
	if err != nil {
		t.Fatal(err)
	}
	var keys []reconcile.Request
	for i := range queued {
		keys = append(keys, req(fmt.Sprint(i)))
	}
	if err := c.Watch(newQueueSource(keys...)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	for range workers {
		<-inFlight
	}
	cancel()
	time.Sleep(50 * time.Millisecond) // the stop reaches the workers while they are busy
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) != workers {
		t.Fatalf("%d reconciles ran, want only the %d in flight at the stop: %v", len(started), workers, started)
	}
}
