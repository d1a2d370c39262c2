package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin/internal/modsource"
	"github.com/wasmrec/wasmrec/internal/backoff"
)

// These tests run a Supervisor with no control plane, on offlineHost's manager (never started):
// its fetches and waits are scripted, its loads and starts are the Host's own.

// script is what a supervised plugin's fetches return, one per attempt (the last repeats), and
// the waits the supervisor asked for.
type script struct {
	mu      sync.Mutex
	fetches []func() ([]byte, error)
	calls   int
	waits   []time.Duration
	states  []State
}

func (sc *script) supervise(h *Host, cfg Config) *Supervisor {
	s := h.Supervise(cfg, SuperviseOptions{OnState: func(st State) {
		sc.mu.Lock()
		sc.states = append(sc.states, st)
		sc.mu.Unlock()
	}})
	s.fetch = func(context.Context, string) ([]byte, *modsource.Source, error) {
		sc.mu.Lock()
		f := sc.fetches[min(sc.calls, len(sc.fetches)-1)]
		sc.calls++
		sc.mu.Unlock()
		b, err := f()
		if err != nil {
			return nil, nil, &FetchError{Module: cfg.Module, Err: err}
		}
		return b, &modsource.Source{Ref: cfg.Module}, nil
	}
	s.wait = func(ctx context.Context, _ string, d time.Duration) bool {
		sc.mu.Lock()
		sc.waits = append(sc.waits, d)
		sc.mu.Unlock()
		return ctx.Err() == nil
	}
	s.delays = backoff.Policy{Initial: time.Second, Max: 5 * time.Minute}.Start // no jitter
	return s
}

func (sc *script) reasons() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var out []string
	for _, st := range sc.states {
		switch {
		case st.Plugin != nil:
			out = append(out, "loaded")
		case st.Reason != "":
			out = append(out, st.Reason)
		default:
			out = append(out, "stopped")
		}
	}
	return out
}

func bytesOf(b []byte) func() ([]byte, error) { return func() ([]byte, error) { return b, nil } }

func missing() ([]byte, error) { return nil, os.ErrNotExist }

// run starts s until the test ends, and waits for the state loaded.
func run(t *testing.T, s *Supervisor) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start returned %v; a supervisor never fails the manager", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestSupervisorLoadsAndStartsAPluginWithItsTriggers(t *testing.T) {
	h, _ := offlineHost(t)
	sc := &script{fetches: []func() ([]byte, error){bytesOf(swapGuest(t, "1"))}}
	s := sc.supervise(h, thingsGrant())
	var added, removed []manager.Runnable
	s.start = func(p *Plugin) ([]manager.Runnable, error) {
		r, err := h.start(p)
		added = r
		return r, err
	}
	s.stop = func(ctx context.Context, p *Plugin, r []manager.Runnable) {
		removed = r
		h.stop(ctx, p, r)
	}
	stop := run(t, s)
	<-s.Tried()
	p := s.State().Plugin
	if p == nil {
		t.Fatalf("not loaded: %+v", s.State())
	}
	// The controller, its informers and both triggers joined the manager.
	var names []string
	for _, r := range added {
		names = append(names, fmt.Sprintf("%T", r))
	}
	if want := []string{"*crdwatch.Following", "*crdwatch.Following", "*modsource.FileWatcher", "*modsource.TagPoller"}; !slices.Equal(names, want) {
		t.Errorf("the supervisor added %v to the manager; want %v: the plugin's informers and controller, and its triggers", names, want)
	}
	stop()
	if !p.isClosed() {
		t.Error("the plugin was not closed when its supervisor stopped")
	}
	if !slices.Equal(removed, added) {
		t.Errorf("the stop removed %v of %v", removed, added)
	}
	if got := sc.reasons(); !slices.Equal(got, []string{"loaded", "stopped"}) {
		t.Errorf("states %v, want loaded then stopped", got)
	}
}

func TestSupervisorRetriesAModuleNotThereYetOnTheBackoff(t *testing.T) {
	h, _ := offlineHost(t)
	sc := &script{fetches: []func() ([]byte, error){missing, missing, missing, bytesOf(swapGuest(t, "1"))}}
	s := sc.supervise(h, thingsGrant())
	run(t, s)
	waitFor(t, "the load", func() bool { return s.State().Plugin != nil })
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if st := sc.states[0]; st.Reason != ReasonFetchFailed || st.Next != time.Second || !errors.Is(st.Err, os.ErrNotExist) || !strings.Contains(st.Err.Error(), `plugin "swap"`) {
		t.Errorf("after the first attempt: %+v; want FetchFailed naming the plugin, next in 1s", st)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(sc.waits, want) {
		t.Errorf("waits %v, want %v", sc.waits, want)
	}
	if got := s.State().Attempts; got != 4 {
		t.Errorf("%d attempts, want 4", got)
	}
}

func TestSupervisorDoesNotCompileARefusedModuleAgain(t *testing.T) {
	h, m := offlineHost(t)
	v5, v1 := swapGuest(t, "5"), swapGuest(t, "1") // v5 asks for Secrets, which the grant lacks
	sc := &script{fetches: []func() ([]byte, error){bytesOf(v5), bytesOf(v5), bytesOf(v5), bytesOf(v1)}}
	s := sc.supervise(h, thingsGrant())
	run(t, s)
	waitFor(t, "the load of v1", func() bool { return s.State().Plugin != nil })
	if got := compiles(m, "swap"); got != 2 {
		t.Errorf("%g compiles, want 2: v5 once, then v1", got)
	}
	got := sc.reasons()
	if !slices.Equal(got, []string{ReasonRefused, ReasonRefused, ReasonRefused, "loaded"}) {
		t.Fatalf("states %v", got)
	}
	sc.mu.Lock()
	first, again := sc.states[0].Err, sc.states[1].Err
	sc.mu.Unlock()
	var before *RefusedBeforeError
	if !errors.As(first, new(*RefusedError)) || !strings.Contains(first.Error(), "asks for permissions it was not granted") {
		t.Errorf("first refusal: %v", first)
	}
	if !errors.As(again, &before) || before.Digest != digestOf(v5) || !strings.Contains(again.Error(), `plugin "swap"`) {
		t.Errorf("second attempt: %v; want a RefusedBeforeError for v5 naming the plugin", again)
	}

	// Other settings are another supervisor: they may let it in, and it is tried again.
	cfg := thingsGrant(abi.Permission{Group: "", Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}})
	cfg.Name = "swap-secrets"
	sc2 := &script{fetches: []func() ([]byte, error){bytesOf(v5)}}
	s2 := sc2.supervise(h, cfg)
	run(t, s2)
	<-s2.Tried()
	if s2.State().Plugin == nil {
		t.Errorf("v5 under a grant with Secrets: %+v", s2.State())
	}
}

func TestSupervisorRefusesInvalidSettingsWithoutFetching(t *testing.T) {
	h, _ := offlineHost(t)
	sc := &script{fetches: []func() ([]byte, error){bytesOf(swapGuest(t, "1"))}}
	cfg := thingsGrant()
	cfg.MaxConcurrentReconciles = -1
	s := sc.supervise(h, cfg)
	run(t, s)
	<-s.Tried()
	if st := s.State(); st.Reason != ReasonInvalid || !strings.Contains(st.Err.Error(), "maxConcurrentReconciles") {
		t.Errorf("%+v; want Invalid naming the field", st)
	}
	if sc.calls != 0 {
		t.Errorf("%d fetches of a plugin whose settings are invalid", sc.calls)
	}
}

func TestSupervisorReportsAStartTheManagerRefuses(t *testing.T) {
	h, _ := offlineHost(t)
	sc := &script{fetches: []func() ([]byte, error){bytesOf(swapGuest(t, "1"))}}
	s := sc.supervise(h, thingsGrant())
	s.start = func(p *Plugin) ([]manager.Runnable, error) { return nil, manager.ErrStopping }
	run(t, s)
	<-s.Tried()
	if st := s.State(); st.Reason != ReasonStartFailed || !errors.Is(st.Err, manager.ErrStopping) {
		t.Errorf("%+v; want StartFailed", st)
	}
	waitFor(t, "the name released", func() bool { return h.claim(thingsGrant()) == nil }) // closed: its name is free
}

// A plugin of the host config and one of an object are supervised alike; the object's acts as
// its ServiceAccount and is confined to its namespace.
func TestSupervisorRunsAnObjectsPluginAsItsServiceAccount(t *testing.T) {
	h, _ := offlineHost(t)
	cfg := thingsGrant()
	cfg.Name, cfg.Namespaces, cfg.Confined = "team-a.swap", []string{"team-a"}, true
	cfg.ServiceAccount = &ServiceAccountRef{Namespace: "team-a", Name: "swapper"}
	sc := &script{fetches: []func() ([]byte, error){bytesOf(swapGuest(t, "1"))}}
	s := sc.supervise(h, cfg)
	run(t, s)
	<-s.Tried()
	// The offline API server cannot answer the review of the plugin's reads: the load fails,
	// naming the ServiceAccount, and is tried again.
	st := s.State()
	if st.Reason != ReasonLoadFailed || !strings.Contains(st.Err.Error(), "system:serviceaccount:team-a:swapper") {
		t.Errorf("%+v; want LoadFailed naming the ServiceAccount whose reads could not be reviewed", st)
	}
	if st.Next == 0 {
		t.Error("a load failure that may pass is not tried again")
	}
}

// A plugin acting as its own ServiceAccount is reviewed again and again: when its RBAC no longer
// lets it read what it watches, it is stopped, module kept, and started again once it may.
func TestSupervisorStopsAPluginWhoseReadsAreRevoked(t *testing.T) {
	h, m := offlineHost(t)
	sc := &script{fetches: []func() ([]byte, error){bytesOf(swapGuest(t, "1"))}}
	s := sc.supervise(h, thingsGrant())
	reviews := make(chan error)
	s.review = func(ctx context.Context, p *Plugin) error {
		select {
		case err := <-reviews:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.every = time.Millisecond
	var mu sync.Mutex
	var starts, removes int
	s.start = func(p *Plugin) ([]manager.Runnable, error) {
		mu.Lock()
		starts++
		mu.Unlock()
		return h.start(p)
	}
	s.remove = func(ctx context.Context, p *Plugin, r []manager.Runnable) {
		mu.Lock()
		removes++
		mu.Unlock()
		h.remove(ctx, p, r)
	}
	run(t, s)
	<-s.Tried()
	p := s.State().Plugin
	if p == nil {
		t.Fatalf("not loaded: %+v", s.State())
	}
	reviews <- nil // still allowed: nothing happens
	revoked := errors.New(`the API server does not let system:serviceaccount:team-a:swap list follow.wasmrec.dev/things in team-a`)
	reviews <- revoked
	waitFor(t, "the plugin stopped", func() bool { return s.State().Reason == ReasonRevoked })
	if st := s.State(); st.Plugin != nil || !errors.Is(st.Err, revoked) {
		t.Errorf("after the revocation: %+v", st)
	}
	if p.isClosed() {
		t.Error("the module was closed: it is kept, to start again without a compile")
	}
	reviews <- revoked // still revoked: nothing more happens
	reviews <- nil
	waitFor(t, "the plugin started again", func() bool { return s.State().Plugin == p })
	mu.Lock()
	defer mu.Unlock()
	if starts != 2 || removes != 1 {
		t.Errorf("%d starts and %d removes, want 2 and 1", starts, removes)
	}
	if got := compiles(m, "swap"); got != 1 {
		t.Errorf("%g compiles, want 1", got)
	}
}

// A plugin with a rollout whose module changed while the host was away (its object's status
// names another digest) loads the version that served, from the module cache, and rolls the
// new one out from it; without that version in the cache, the new one loads as it is.
func TestSupervisorResumesARolloutFromTheVersionThatServed(t *testing.T) {
	h, _ := offlineHost(t)
	v1, v2 := swapGuest(t, "1"), swapGuest(t, "2")
	cache := map[string][]byte{digestOf(v1): v1}
	for _, tc := range []struct {
		live        string
		serving     string
		rollingOut  bool
		description string
	}{
		{digestOf(v1), digestOf(v1), true, "v1 in the cache"},
		{"sha256:" + strings.Repeat("0", 64), digestOf(v2), false, "the live version not in the cache"},
	} {
		sc := &script{fetches: []func() ([]byte, error){bytesOf(v2)}}
		cfg := withRollout(thingsGrant())
		s := sc.supervise(h, cfg)
		s.opts.Live = tc.live
		s.cached = func(d string) ([]byte, bool) { b, ok := cache[d]; return b, ok }
		stop := run(t, s)
		<-s.Tried()
		p := s.State().Plugin
		if p == nil {
			t.Fatalf("%s: not loaded: %+v", tc.description, s.State())
		}
		ro := p.Rollout()
		if p.Module().Digest() != tc.serving || (ro != nil && ro.Active()) != tc.rollingOut || (tc.rollingOut && ro.Candidate != digestOf(v2)) {
			t.Errorf("%s: serving %s, rollout %+v; want %s serving, rolling out v2: %v", tc.description, p.Module().ShortDigest(), ro, tc.serving, tc.rollingOut)
		}
		stop()
	}
}

// roomy is a CodeBudget that refuses every charge until it is opened.
type roomy struct {
	mu   sync.Mutex
	open bool
}

func (b *roomy) Charge(int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return errors.New("no room")
	}
	return nil
}

func (b *roomy) Release(int64) {}

// A plugin whose module does not fit its budget is OverBudget, not refused: it is not compiled,
// and Retry (its budget has room again) loads it at once, not after its backoff.
func TestAPluginOverItsBudgetLoadsWhenRetried(t *testing.T) {
	h, _ := offlineHost(t)
	sc := &script{fetches: []func() ([]byte, error){bytesOf(swapGuest(t, "1"))}}
	cfg := thingsGrant()
	budget := &roomy{}
	cfg.Code = budget
	s := sc.supervise(h, cfg)
	s.wait = func(ctx context.Context, _ string, _ time.Duration) bool { // a backoff longer than the test
		<-ctx.Done()
		return false
	}
	run(t, s)
	<-s.Tried()
	if st := s.State(); st.Reason != ReasonOverBudget || !strings.Contains(st.Err.Error(), "no room") {
		t.Fatalf("a module over its budget: %+v, want OverBudget saying why", st)
	}
	if err := s.refused.Check(digestOf(swapGuest(t, "1"))); err != nil {
		t.Fatalf("a module over its budget is remembered as refused: %v", err)
	}
	budget.mu.Lock()
	budget.open = true
	budget.mu.Unlock()
	s.Retry()
	waitFor(t, "the plugin loaded once retried", func() bool { return s.State().Plugin != nil })
}
