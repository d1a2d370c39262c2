package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin/internal/modsource"
	"github.com/wasmrec/wasmrec/host/plugin/internal/versions"
	"github.com/wasmrec/wasmrec/host/signature"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/backoff"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// Why a supervised plugin is not running, as State.Reason says it.
const (
	ReasonInvalid     = "Invalid"      // the settings are wrong: nothing is tried until they change
	ReasonFetchFailed = "FetchFailed"  // the module could not be had: tried again with backoff
	ReasonRefused     = "Refused"      // the module was refused for what it is: tried again when it changes
	ReasonNotSigned   = "NotSigned"    // the module is not signed as required: looked at again with backoff
	ReasonLoadFailed  = "LoadFailed"   // loading failed otherwise (its identity, say): tried again with backoff
	ReasonOverBudget  = "OverBudget"   // compiling the module does not fit its memory budget now: tried again with backoff
	ReasonStartFailed = "StartFailed"  // the manager would not run it: not tried again
	ReasonRevoked     = "ReadsRevoked" // its ServiceAccount may no longer read what it watches: stopped until it may
)

// State is what a Supervisor's plugin is doing.
type State struct {
	// Plugin is the plugin loaded and running; nil until it is, and after it stops.
	Plugin *Plugin
	// Reason says why Plugin is nil after an attempt ("" before the first one ends).
	Reason string
	// Err is the last failure; for a module refused before, the first refusal.
	Err error
	// Next is the wait before the next attempt; 0 when none is due.
	Next time.Duration
	// Attempts counts the loads tried.
	Attempts int
}

// SuperviseOptions configure Host.Supervise. The zero value is ready to use.
type SuperviseOptions struct {
	// OnState, if set, is told of every change of state, without locks held.
	OnState func(State)
	// Hooks are given to the plugin at each load (Config.Hooks).
	Hooks
	// Reporting says whether this replica logs the plugin's failures (replicas that load the
	// same plugins let one of them speak). Defaults to always.
	Reporting func() bool
	// Live is the digest of the module that served the plugin last, as its object's status
	// says (empty: unknown). For a plugin with a rollout, a load that finds another module
	// loads that one first, from the host's module cache, and rolls the new one out from it:
	// a restart in the middle of a rollout starts it again instead of skipping it.
	Live string
}

// Supervisor runs one plugin from its settings, whatever the source of those settings (the host
// config, a Plugin object): it loads the module; when the module cannot be had or is refused, it
// tries again on the backoff.ModuleFetch schedule, or at once when the module file changes, and
// never compiles again a module refused under the same settings; once loaded, it adds the plugin
// and the triggers that swap in new modules to the manager; it reports each change of state;
// and when it stops, it removes the plugin from the manager and closes it.
//
// It is a manager Runnable that runs on every replica (the plugin's controller itself runs on the
// leader, or on the replica holding it). New settings are a new Supervisor.
type Supervisor struct {
	cfg  Config
	opts SuperviseOptions
	log  logr.Logger

	// What it does, the Host's by default; tests replace them.
	fetch  func(ctx context.Context, module string) ([]byte, *modsource.Source, error)
	load   func(ctx context.Context, cfg Config, wasm []byte, src *modsource.Source) (*Plugin, error)
	cached func(digest string) ([]byte, bool) // the host's module cache
	forget func(digest string)                // takes a refused module out of it
	start  func(p *Plugin) ([]manager.Runnable, error)
	stop   func(ctx context.Context, p *Plugin, runnables []manager.Runnable)
	remove func(ctx context.Context, p *Plugin, runnables []manager.Runnable)
	review func(ctx context.Context, p *Plugin) error // nil: a plugin acting as the host
	every  time.Duration                              // between reviews
	wait   func(ctx context.Context, module string, d time.Duration) bool
	delays func() *backoff.Schedule

	refused versions.Refused // the module refused under cfg, if one was

	mu    sync.Mutex
	state State
	tried chan struct{} // closed when the first attempt has ended
	again chan struct{} // Retry: the next attempt is due now
}

var (
	_ manager.Runnable               = (*Supervisor)(nil)
	_ manager.LeaderElectionRunnable = (*Supervisor)(nil)
)

// Supervise returns a Supervisor of the plugin cfg describes. Add it to the host's manager.
func (h *Host) Supervise(cfg Config, opts SuperviseOptions) *Supervisor {
	if opts.Reporting == nil {
		opts.Reporting = func() bool { return true }
	}
	cfg.Hooks = opts.Hooks
	s := &Supervisor{
		cfg:  cfg,
		opts: opts,
		log:  h.log.WithValues("plugin", cfg.Name),
		fetch: func(ctx context.Context, module string) ([]byte, *modsource.Source, error) {
			return h.fetchSigned(ctx, cfg, module)
		},
		load:   h.load,
		cached: h.oci.CachedModule,
		forget: h.oci.Forget,
		start:  h.start,
		stop:   h.stop,
		remove: h.remove,
		every:  reviewTTL,
		wait:   h.WaitForModule,
		delays: backoff.ModuleFetch.Start,
		tried:  make(chan struct{}),
		again:  make(chan struct{}, 1),
	}
	if cfg.ServiceAccount != nil || h.impersonate != "" { // it acts as its own ServiceAccount
		s.review = func(ctx context.Context, p *Plugin) error {
			p.identity.forget() // the API server's answers now, not those it gave lately
			v := p.current.Load()
			return p.checkReads(ctx, v.policy, v.mod.Manifest())
		}
	}
	return s
}

// Name is the plugin's name and role, for the manager's reports.
func (s *Supervisor) Name() string { return s.cfg.Name + " (supervisor)" }

// NeedLeaderElection is false: every replica loads the plugin.
func (s *Supervisor) NeedLeaderElection() bool { return false }

// Config is the settings the plugin is supervised with.
func (s *Supervisor) Config() Config { return s.cfg }

// State is what the plugin is doing now.
func (s *Supervisor) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Tried is closed once the first attempt to load the plugin has ended, either way.
func (s *Supervisor) Tried() <-chan struct{} { return s.tried }

func (s *Supervisor) set(st State) {
	s.mu.Lock()
	st.Attempts = s.state.Attempts
	if st.Reason != "" || st.Plugin != nil {
		st.Attempts++
	}
	s.state = st
	first := st.Attempts == 1
	s.mu.Unlock()
	if first && (st.Reason != "" || st.Plugin != nil) {
		select {
		case <-s.tried:
		default:
			close(s.tried)
		}
	}
	if s.opts.OnState != nil {
		s.opts.OnState(st)
	}
}

// Start loads the plugin and keeps it running until ctx is done, then stops and closes it. It
// returns nil: a plugin that cannot be loaded is reported, never a reason to stop the host.
func (s *Supervisor) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		s.set(State{Reason: ReasonInvalid, Err: err})
		s.report(err, "plugin not loaded: its settings are invalid; fix them")
		<-ctx.Done()
		return nil
	}
	delays := s.delays()
	for {
		p, reason, err := s.attempt(ctx)
		if ctx.Err() != nil {
			if p != nil {
				s.stop(context.WithoutCancel(ctx), p, nil)
			}
			return nil
		}
		if err == nil {
			s.run(ctx, p)
			return nil
		}
		next := delays.Next()
		prev := s.State()
		s.set(State{Reason: reason, Err: err, Next: next})
		var before *versions.RefusedBeforeError
		switch {
		case errors.As(err, &before):
			if s.opts.Reporting() {
				s.log.Info("plugin still refused: it is looked at again when its module changes; if its grant or settings are what is wrong, fix them (a host config's plugin: edit the config and restart the host)", "refused", err.Error(), "in", next.Round(time.Millisecond))
			}
		case reason == ReasonNotSigned && prev.Reason == ReasonNotSigned && prev.Err.Error() == err.Error():
			// Said once: it is looked at again, quietly, until its signature comes.
		case prev.Attempts == 0:
			s.report(err, "plugin not loaded; the others run, and it is tried again", "in", next.Round(time.Millisecond))
		default:
			s.report(err, "plugin still not loaded; trying again", "in", next.Round(time.Millisecond))
		}
		watch := s.cfg.Module // a module file that appears is tried at once
		if _, fromRegistry := s.cfg.OCIRef(); reason == ReasonNotSigned && !fromRegistry {
			watch += signature.FileSuffix // and one not signed, once its signature is written
		}
		if !s.waitOrRetry(ctx, watch, next) {
			return nil
		}
	}
}

// Retry has a supervisor that waits to load its plugin try again at once, as when what it
// waits for may have come (memory given back to its budget, say). If it is not waiting, its
// next wait ends at once.
func (s *Supervisor) Retry() {
	select {
	case s.again <- struct{}{}:
	default:
	}
}

// waitOrRetry waits as s.wait does, or until Retry; false once ctx is done.
func (s *Supervisor) waitOrRetry(ctx context.Context, module string, d time.Duration) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.again:
			cancel()
		case <-wctx.Done():
		}
	}()
	s.wait(wctx, module, d)
	return ctx.Err() == nil
}

func (s *Supervisor) report(err error, msg string, kv ...any) {
	if s.opts.Reporting() {
		s.log.Error(err, msg, kv...)
	}
}

// attempt fetches and loads the plugin once. A module refused before under the same settings
// is not compiled again.
func (s *Supervisor) attempt(ctx context.Context) (*Plugin, string, error) {
	wasm, src, err := s.fetch(ctx, s.cfg.Module)
	var fetch *FetchError
	switch {
	case errors.As(err, new(*SignatureError)):
		return nil, ReasonNotSigned, err
	case errors.As(err, &fetch):
		return nil, ReasonFetchFailed, fmt.Errorf("plugin %q: %w", s.cfg.Name, err)
	case err != nil:
		return nil, ReasonInvalid, err
	}
	digest := digestOf(wasm)
	if err := s.refused.Check(digest); err != nil {
		return nil, ReasonRefused, err
	}
	var p *Plugin
	live := s.liveModule(digest)
	if live != nil {
		if p, err = s.load(ctx, s.cfg, live, src); err != nil {
			s.log.Info("the version that served last cannot be loaded again: the new version takes every key without a rollout", "live", wasmShort(s.opts.Live), "error", err.Error())
			p = nil
		}
	}
	if p == nil {
		if p, err = s.load(ctx, s.cfg, wasm, src); err != nil {
			if errors.As(err, new(*RefusedError)) && ctx.Err() == nil {
				s.refused.Refuse(digest, err)
				if s.forget != nil {
					s.forget(digest) // the host keeps no module it refused
				}
				return nil, ReasonRefused, err
			}
			if overBudget(err) {
				return nil, ReasonOverBudget, err
			}
			return nil, ReasonLoadFailed, err
		}
	}
	if p.Module().Digest() != digest { // the version that served: the new one rolls out from it
		s.log.Info("the plugin's module changed while the host was away: loaded the version that served, rolling out the new one from it", "live", p.Module().ShortDigest(), "new", wasmShort(digest))
		_ = p.swap(ctx, wasm, "", nil) // a refusal is told to OnSwap, and the live version serves on
	}
	return p, "", nil
}

// liveModule is the module that served the plugin last, if it has a rollout, that is not the
// module now at its source (digest), and the host's module cache has it; else nil.
func (s *Supervisor) liveModule(digest string) []byte {
	if s.cfg.Rollout == nil || s.opts.Live == "" || s.opts.Live == digest || s.cached == nil {
		return nil
	}
	b, ok := s.cached(s.opts.Live)
	if !ok {
		s.log.Info("the version that served last is not in the host's module cache (--oci-cache): the new version takes every key without a rollout", "live", wasmShort(s.opts.Live), "new", wasmShort(digest))
		return nil
	}
	return b
}

func wasmShort(digest string) string { return wasm.ShortDigest(digest) }

// overBudget says err is a module that did not fit its plugin's Config.Code.
func overBudget(err error) bool { return errors.As(err, new(*wasm.BudgetError)) }

// run starts p and keeps it until ctx is done. A plugin acting as a ServiceAccount of its own
// has its reads reviewed again every reviewTTL: one whose RBAC no longer lets it read what it
// watches is stopped (its informers let go of, its module kept) until it may again.
func (s *Supervisor) run(ctx context.Context, p *Plugin) {
	runnables, err := s.start(p)
	if err != nil {
		s.stop(context.WithoutCancel(ctx), p, runnables)
		err = fmt.Errorf("plugin %q: %w", s.cfg.Name, err)
		s.set(State{Reason: ReasonStartFailed, Err: err})
		s.report(err, "plugin not started; the others run")
		<-ctx.Done()
		return
	}
	m := p.Module().Manifest()
	s.log.Info("plugin loaded", "digest", p.Module().ShortDigest(), "for", kinds.String(m.For.APIVersion, m.For.Kind), "module", s.cfg.Module)
	s.set(State{Plugin: p})
	var reviews <-chan time.Time
	if s.review != nil {
		t := time.NewTicker(s.every)
		defer t.Stop()
		reviews = t.C
	}
	running := true
	for {
		select {
		case <-ctx.Done():
			s.set(State{})
			if !running {
				runnables = nil
			}
			s.stop(context.WithoutCancel(ctx), p, runnables)
			return
		case <-reviews:
		}
		err := s.review(ctx, p)
		switch {
		case ctx.Err() != nil:
		case err != nil && running:
			s.remove(ctx, p, runnables)
			running = false
			s.set(State{Reason: ReasonRevoked, Err: err, Next: s.every})
			s.report(err, "plugin stopped: its ServiceAccount may no longer read what it watches; it starts again when it may")
		case err == nil && !running:
			if runnables, err = s.start(p); err != nil {
				s.remove(ctx, p, runnables)
				s.set(State{Reason: ReasonRevoked, Err: err, Next: s.every})
				continue
			}
			running = true
			s.log.Info("plugin started again: its ServiceAccount may read what it watches")
			s.set(State{Plugin: p})
		}
	}
}

// start adds p and its triggers to the manager, returning what it added.
func (h *Host) start(p *Plugin) ([]manager.Runnable, error) {
	added, err := h.Run(p)
	if err != nil {
		return added, err
	}
	for _, t := range p.Triggers() {
		if err := h.mgr.Add(t); err != nil {
			return added, err
		}
		added = append(added, t)
	}
	return added, nil
}

// stop removes what start added and closes p. A guest that loops without being interruptible
// holds its reconcile: it waits for it at most the plugin's timeout and 5 s more.
func (h *Host) stop(ctx context.Context, p *Plugin, runnables []manager.Runnable) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ReconcileTimeout()+5*time.Second)
	defer cancel()
	h.remove(ctx, p, runnables)
	if err := p.Close(ctx); err != nil {
		h.log.Error(err, "closing a plugin's module", "plugin", p.cfg.Name)
	}
}

// remove removes what start added, in reverse, waiting for a guest that loops at most the
// plugin's timeout and 5 s more.
func (h *Host) remove(ctx context.Context, p *Plugin, runnables []manager.Runnable) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ReconcileTimeout()+5*time.Second)
	defer cancel()
	for i := len(runnables) - 1; i >= 0; i-- {
		if err := h.mgr.Remove(ctx, runnables[i]); err != nil && !errors.Is(err, manager.ErrStopping) {
			h.log.Error(err, "stopping a plugin", "plugin", p.cfg.Name)
		}
	}
}
