package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// journal records what runnables did, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, fmt.Sprintf(format, args...))
}

func (j *journal) snapshot() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

func (j *journal) index(line string) int { return slices.Index(j.snapshot(), line) }

// recorder is a runnable that writes its start and stop to a journal.
type recorder struct {
	name    string
	j       *journal
	leader  *bool // nil: no NeedLeaderElection method behaviour (defaults to leader group)
	started chan struct{}
	err     error // returned at once from Start if set
}

func newRecorder(name string, j *journal) *recorder {
	return &recorder{name: name, j: j, started: make(chan struct{})}
}

func (r *recorder) Name() string { return r.name }
func (r *recorder) Start(ctx context.Context) error {
	r.j.add("start %s", r.name)
	close(r.started)
	if r.err != nil {
		return r.err
	}
	<-ctx.Done()
	r.j.add("stop %s", r.name)
	return nil
}

type otherRunnable struct{ *recorder }

func (otherRunnable) NeedLeaderElection() bool { return false }

type cacheLike struct {
	*recorder
	synced chan struct{}
}

func (c *cacheLike) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.synced:
		c.j.add("synced %s", c.name)
		return true
	case <-ctx.Done():
		return false
	}
}

func zero() *time.Duration               { d := time.Duration(0); return &d }
func dur(d time.Duration) *time.Duration { return &d }

// run starts m and returns a function that stops it and returns Start's error.
func run(t *testing.T, m *Manager) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestGroupsStartInOrderAndStopInReverse(t *testing.T) {
	j := &journal{}
	m, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Name: "probe", Listener: ln, Server: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	})}}
	c := &cacheLike{recorder: newRecorder("cache", j), synced: make(chan struct{})}
	o := otherRunnable{newRecorder("other", j)}
	l := newRecorder("controller", j)
	// Added in the reverse of the order they must start in.
	for _, r := range []Runnable{l, o, c, srv} {
		if err := m.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	stop := run(t, m)

	<-c.started
	// The server group started first: it answers before the caches have synced.
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatalf("server not serving while caches sync: %v", err)
	}
	resp.Body.Close()
	select {
	case <-o.started:
		t.Fatal("other runnables started before the caches synced")
	case <-m.Elected():
		t.Fatal("leader runnables started before the caches synced")
	default:
	}
	close(c.synced)
	<-l.started
	<-o.started
	if err := stop(); err != nil {
		t.Fatalf("Start returned %v", err)
	}

	// Groups are dispatched in order, but a group does not wait for its runnables to be inside
	// Start before the next group is dispatched: "start other" and "start controller" may come
	// either way round. Stopping waits for each group, so the stop order is strict.
	got := j.snapshot()
	want := []string{"start cache", "synced cache", "start other", "start controller", "stop controller", "stop other", "stop cache"}
	if len(got) == len(want) && got[2] == want[3] && got[3] == want[2] {
		got[2], got[3] = got[3], got[2]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("journal:\n got %q\nwant %q", got, want)
	}
	if _, err := http.Get("http://" + ln.Addr().String()); err == nil {
		t.Fatal("server still serving after stop")
	}
}

func TestAddAndRemoveAfterStart(t *testing.T) {
	j := &journal{}
	m, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stay := newRecorder("stay", j)
	if err := m.Add(stay); err != nil {
		t.Fatal(err)
	}
	stop := run(t, m)
	<-stay.started

	late := newRecorder("late", j)
	if err := m.Add(late); err != nil {
		t.Fatal(err)
	}
	<-late.started // started at once

	if err := m.Remove(context.Background(), late); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if i := j.index("stop late"); i < 0 {
		t.Fatal("Remove returned before the runnable stopped")
	}
	if j.index("stop stay") >= 0 {
		t.Fatal("removing one runnable stopped another")
	}
	if err := m.Remove(context.Background(), late); err == nil {
		t.Fatal("removing a runnable twice succeeded")
	}
	// It can be added again after removal.
	again := newRecorder("again", j)
	if err := m.Add(again); err != nil {
		t.Fatal(err)
	}
	<-again.started
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Removing a runnable that the manager's own stop has already stopped is not an error: owners
// that unload what they added as the manager stops (the Plugin controller does) race with it.
func TestRemoveAfterStop(t *testing.T) {
	j := &journal{}
	m, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder("r", j)
	if err := m.Add(r); err != nil {
		t.Fatal(err)
	}
	stop := run(t, m)
	<-r.started
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(context.Background(), r); err != nil {
		t.Fatalf("Remove after the manager stopped: %v", err)
	}
	if err := m.Remove(context.Background(), newRecorder("never added", j)); err != nil {
		t.Fatalf("Remove of a runnable never added, after the manager stopped: %v", err)
	}
}

func TestRemoveBeforeStart(t *testing.T) {
	j := &journal{}
	m, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	gone := newRecorder("gone", j)
	kept := otherRunnable{newRecorder("kept", j)}
	for _, r := range []Runnable{gone, kept} {
		if err := m.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Remove(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	stop := run(t, m)
	<-kept.started
	<-m.Elected()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if j.index("start gone") >= 0 {
		t.Fatal("a runnable removed before Start was started")
	}
}

func TestRemoveRefusesUncomparable(t *testing.T) {
	m, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil })
	if err := m.Add(f); err != nil {
		t.Fatal(err)
	}
	err = m.Remove(context.Background(), f)
	if err == nil || !strings.Contains(err.Error(), "not comparable") {
		t.Fatalf("Remove(func) = %v, want an error saying it is not comparable", err)
	}
}

func TestFirstErrorStopsTheManager(t *testing.T) {
	j := &journal{}
	m, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	healthy := otherRunnable{newRecorder("healthy", j)}
	if err := m.Add(healthy); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	failing := newRecorder("failing", j)
	failing.err = boom
	if err := m.Add(failing); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Start(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "failing: boom") {
			t.Fatalf("Start = %v, want boom naming the runnable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a runnable error did not stop the manager")
	}
	if j.index("stop healthy") < 0 {
		t.Fatal("the other runnables were not stopped")
	}
	if err := m.Add(newRecorder("late", j)); !errors.Is(err, ErrStopping) {
		t.Fatalf("Add after stop = %v, want ErrStopping", err)
	}
}

func TestGracefulShutdownTimeout(t *testing.T) {
	m, err := New(nil, Options{GracefulShutdownTimeout: dur(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	stuck := &stubborn{release: release, started: make(chan struct{})}
	polite := otherRunnable{newRecorder("polite", &journal{})} // stopped after the stuck one's group
	for _, r := range []Runnable{stuck, polite} {
		if err := m.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	stop := run(t, m)
	<-stuck.started
	<-polite.started
	err = stop()
	close(release) // let it go so no goroutine outlives the test
	if err == nil || !strings.Contains(err.Error(), "still running") || !strings.Contains(err.Error(), "stubborn") {
		t.Fatalf("Start = %v, want a timeout naming the runnable", err)
	}
	// Its group used up the timeout; the later group, which stops when asked, is not named.
	if strings.Contains(err.Error(), "polite") {
		t.Fatalf("Start = %v, which names a runnable that stops when asked", err)
	}
	stuck.wg.Wait()
}

// stubborn ignores its context until released.
type stubborn struct {
	release, started chan struct{}
	wg               sync.WaitGroup
}

func (s *stubborn) Start(context.Context) error {
	s.wg.Add(1)
	defer s.wg.Done()
	close(s.started)
	<-s.release
	return nil
}

func TestStartTwice(t *testing.T) {
	m, err := New(nil, Options{GracefulShutdownTimeout: zero()})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, m)
	<-m.Elected()
	if err := m.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestLeaderElectionDefaults(t *testing.T) {
	le := LeaderElection{Namespace: "ns", Name: "lease"}.withDefaults()
	if le.LeaseDuration != 15*time.Second || le.RenewDeadline != 10*time.Second || le.RetryPeriod != 2*time.Second ||
		le.ReleaseOnCancel == nil || !*le.ReleaseOnCancel || le.Identity == "" {
		t.Fatalf("defaults: %+v", le)
	}
	m, err := New(nil, Options{LeaderElection: &LeaderElection{Namespace: "ns", Name: "lease"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "needs a cluster config") {
		t.Fatalf("Start without a cluster = %v, want an error saying leader election needs one", err)
	}
}
