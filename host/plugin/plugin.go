package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/crdwatch"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin/internal/hostcalls"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/plugin/internal/modsource"
	"github.com/wasmrec/wasmrec/host/plugin/internal/policy"
	"github.com/wasmrec/wasmrec/host/plugin/internal/versions"
	"github.com/wasmrec/wasmrec/host/plugin/internal/watches"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/signature"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// version is a module serving a plugin, the policy its manifest and the grant make, and the
// values of its field indexes its guests told.
type version struct {
	mod    *wasm.Module
	policy *policy.Policy
	index  *hostcalls.Index
}

// Plugin is a loaded plugin: a compiled module and the controller that runs it. It is a
// manager Runnable.
//
// Its locks: swapMu orders swaps and guards what they change together (srcs, follows, a
// rollout's srcs); it is held while a swap starts informers and waits for their sync, up to
// swapSyncTimeout. watchMu guards keys and candKeys, which the warmer, health checks and the
// cache's goroutines read and must not wait on a swap for. movedMu guards moved, which the
// triggers wait on while a swap runs, and orders the writes of source. health.mu orders what is
// said of the informers the plugin needs, and is held while a hook is told. share and the
// informer set (infs) have their own, taken briefly, never while waiting. They are taken in this
// order, never the other way: swapMu, then the warmer's (warm.mu), then health.mu, then
// watchMu, share's or the informer set's, then the cache's; movedMu after swapMu if both are
// taken, and alone otherwise.
type Plugin struct {
	cfg     Config
	host    *Host
	current atomic.Pointer[version] // swapped whole; a reconcile keeps the one it started on
	swapMu  sync.Mutex              // one swap published at a time; guards srcs and follows

	kept     versions.Kept // versions swapped out lately, and digests refused
	ctrl     *controller.Controller
	forGVK   schema.GroupVersionKind
	api      *hostcalls.API // the guest's host calls
	infs     *informers.Set // every informer the plugin holds, and what for
	reader   *hostcalls.Reader
	identity *identity            // who the guest's API calls are made as
	checkers []*signature.Checker // who must have signed its modules (none: anyone)
	log      logr.Logger
	// indexRefusals counts the times its versions' field indexes were refused a charge.
	indexRefusals atomic.Int64
	ids           atomic.Uint64
	watchMu       sync.Mutex      // guards keys and candKeys
	keys          []cache.Key     // what the sources watch
	candKeys      []cache.Key     // what a rollout's candidate watches, if its watches differ (nil: they do not)
	srcs          watches.Sources // the controller's sources; changed by swaps, under swapMu
	warm          *warmer
	follows       []*crdwatch.Following // the warmer's and the controller's; their kinds follow swaps; under swapMu

	source  atomic.Pointer[modsource.Source] // where the running module came from
	movedMu sync.Mutex                       // guards moved; source is written under it
	moved   chan struct{}                    // closed when source changes; see currentSource

	// ro is the rollout of a new version running now (nil: none); lastRollout the last that
	// ended; shadowing counts the shadow reconciles running. See Config.Rollout.
	ro          atomic.Pointer[rollingOut]
	lastRollout atomic.Pointer[RolloutStatus]
	shadowing   sync.WaitGroup

	share shareState // its units and shards, when replicas share plugins

	// running is whether the controller runs (false while a kind it watches is not served).
	running atomic.Bool

	health pluginHealth // what was said of informers it needs that the host may not list

	failures    failureStreak  // reconciles failed since the last success
	mapFailures failureStreak  // maps of watched objects failed since the last success
	mapTimeouts mapTimeouts    // object versions whose maps timed out
	mapRetries  atomic.Int64   // maps waiting to be tried again (retryMap)
	dropTold    rate.Sometimes // OnDropped: at most once a minute

	overBudgetSaid atomic.Value // the digest of the module last said (logged) not to fit its memory budget
	overBudgetTold atomic.Value // the same, told to OnSwap (a trigger's swap)

	rec *recorder // keeps its recordings; nil if it records nothing
}

var (
	_ manager.Runnable               = (*Plugin)(nil)
	_ manager.LeaderElectionRunnable = (*Plugin)(nil)
	_ reconcile.Reconciler           = (*Plugin)(nil)
)

// FetchAndLoad fetches cfg.Module, from a file or, for an oci:// reference, from a registry or an
// image layout through the Host's OCI client, checks its signatures, and Loads it.
func (h *Host) FetchAndLoad(ctx context.Context, cfg Config) (*Plugin, error) {
	wasmBytes, src, err := h.fetchSigned(ctx, cfg, cfg.Module)
	var fetch *FetchError
	if errors.As(err, &fetch) {
		return nil, fmt.Errorf("plugin %q: %w", cfg.Name, err)
	}
	if err != nil {
		return nil, err
	}
	return h.load(ctx, cfg, wasmBytes, src)
}

// Load compiles and checks a module and builds its controller. The plugin runs once added to
// the manager. Every error names the plugin and says what to do. It checks no signature, as it
// has the bytes and not where they came from: FetchAndLoad and Supervise check what they fetch,
// and the plugin's triggers what they swap to.
func (h *Host) Load(ctx context.Context, cfg Config, wasmBytes []byte) (*Plugin, error) {
	return h.load(ctx, cfg, wasmBytes, &modsource.Source{Ref: cfg.Module})
}

// load is Load of a module from src, which becomes the plugin's source.
func (h *Host) load(ctx context.Context, cfg Config, wasmBytes []byte, src *modsource.Source) (*Plugin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := h.claim(cfg); err != nil {
		return nil, err
	}
	loaded := false
	defer func() {
		if !loaded {
			h.release(cfg.Name)
		}
	}()
	workers := max(cfg.MaxConcurrentReconciles, 1)
	log := h.log.WithValues("plugin", cfg.Name)
	p := &Plugin{cfg: cfg, host: h, log: log, mapFailures: failureStreak{what: "map of a watched object by the plugin's map function"},
		dropTold: rate.Sometimes{Interval: time.Minute}}
	p.source.Store(src)
	checkers, err := h.checkers(cfg)
	if err != nil {
		return nil, err
	}
	p.checkers = checkers
	if p.rec, err = h.recorderFor(cfg); err != nil {
		return nil, err
	}
	defer func() {
		if !loaded {
			p.rec.close()
		}
	}()
	if h.metrics != nil {
		h.metrics.Compiles.WithLabelValues(cfg.Name).Inc()
	}
	mod, err := h.engine.Compile(ctx, wasmBytes, p.moduleOptions())
	if err != nil {
		if ctx.Err() != nil || overBudget(err) {
			return nil, err // not the module's fault: it may load later
		}
		return nil, &RefusedError{Err: err}
	}
	fail := func(err error) (*Plugin, error) {
		_ = mod.Close(ctx)
		if p.identity != nil {
			p.identity.close()
		}
		return nil, fmt.Errorf("plugin %q: %w", cfg.Name, err)
	}
	// refuse fails for what the module is, under these settings: a Supervisor does not
	// compile it again until one of them changes.
	refuse := func(err error) (*Plugin, error) {
		_, err = fail(err)
		return nil, &RefusedError{Err: err}
	}
	m := mod.Manifest()
	v, err := p.versionOf(mod)
	if err != nil {
		return refuse(err)
	}
	// Kinds not served yet are checked when they are, before their informers start.
	if _, err := v.policy.CheckWatches(m, h.mgr.GetCache().RESTMapper()); err != nil {
		return refuse(err)
	}
	if p.identity, err = h.identityFor(cfg); err != nil {
		return fail(err)
	}
	if err := p.checkReads(ctx, v.policy, m); err != nil {
		return fail(err)
	}
	p.current.Store(v)
	if p.forGVK, err = watches.ParseGVK(m.For); err != nil {
		return refuse(fmt.Errorf("for: %w", err))
	}
	p.infs = informers.New(h.mgr.GetCache(), func(u informers.Use, _ cache.Key) {
		if u == informers.Read {
			p.checkHealth() // what it needs has grown
		}
	})
	p.reader = hostcalls.NewReader(p.infs, h.mapper, cfg.Namespaces, p.sharding)
	p.api = p.guestAPI()

	copts := controller.Options{
		MaxConcurrentReconciles: workers,
		RateLimiter:             rateLimiter(cfg.RateLimiter),
		ReconcileTimeout:        cfg.ReconcileTimeout(),
		Logger:                  log,
		// A plugin's errors are its output: logged within its log limit, as its own lines are.
		LogError: func(err error) bool { return p.Module().AdmitLog(len(err.Error())) },
	}
	if h.metrics != nil {
		copts.Recorder, copts.QueueMetrics = h.metrics.Controller(cfg.Name), h.metrics.WorkqueueProvider()
	}
	if p.ctrl, err = controller.New(cfg.Name, p, copts); err != nil {
		return fail(err)
	}
	if p.srcs, err = p.sourcesFor(m); err != nil {
		return refuse(err)
	}
	for _, w := range p.srcs {
		if err := p.ctrl.Watch(w.Src); err != nil {
			return fail(err)
		}
	}
	p.setKeys(p.srcs, nil)
	p.warm = &warmer{p: p}
	p.rec.keepModule(mod, wasmBytes)
	if cfg.Rollout != nil { // once loaded: the host keeps no module it failed to load
		h.oci.Keep(wasmBytes) // for a restart in the middle of a rollout (SuperviseOptions.Live)
	}
	loaded = true
	h.namesMu.Lock()
	h.pruneLoaded()
	if h.loaded == nil {
		h.loaded = map[*Plugin]bool{}
	}
	h.loaded[p] = true
	h.namesMu.Unlock()
	return p, nil
}

// RefusedError is a module refused for what it is, under the plugin's settings: its ABI, its
// manifest against the grant. It does not pass by itself: the module or the settings must change.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }

func (e *RefusedError) Unwrap() error { return e.Err }

// digestOf is a module's digest, as wasm.Module.Digest says it.
func digestOf(wasmBytes []byte) string {
	sum := sha256.Sum256(wasmBytes)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return p.cfg.Name }

// Config is the plugin's settings.
func (p *Plugin) Config() Config { return p.cfg }

// Module is the plugin's compiled module.
func (p *Plugin) Module() *wasm.Module { return p.current.Load().mod }

// versionOf checks mod's manifest against the plugin's grant.
func (p *Plugin) versionOf(mod *wasm.Module) (*version, error) {
	pol, err := policy.New(p.cfg.Name, p.cfg.Permissions, mod.Manifest().Permissions, p.cfg.Namespaces, p.cfg.Confined)
	if err != nil {
		return nil, err
	}
	// The index values are charged where the module's code is (a plugin object's memory budget).
	var budget hostcalls.Budget = p.cfg.Code
	if b, ok := p.cfg.Code.(interface{ ForIndex() wasm.CodeBudget }); ok {
		budget = b.ForIndex() // its refusals say what the charge is for
	}
	idx := hostcalls.NewIndex(budget)
	idx.OnRefused = func(refusal error) {
		if refusal != nil {
			p.indexRefusals.Add(1)
			p.log.Error(refusal, "the memory budget has no room for the values of the plugin's field indexes: the host keeps none, and its lists hand it every item until the budget has room", "digest", mod.ShortDigest())
		} else {
			p.log.Info("the memory budget has room for the values of the plugin's field indexes again: the host keeps them", "digest", mod.ShortDigest())
		}
		if f := p.cfg.Hooks.OnIndexRefused; f != nil {
			f(refusal != nil)
		}
	}
	return &version{mod: mod, policy: pol, index: idx}, nil
}

// checkWatches refuses to start informers for a kind the running module may not list and
// watch. Load and swaps check the kinds served then; this checks the rest once they are.
func (p *Plugin) checkWatches() error {
	v := p.current.Load()
	unresolved, err := v.policy.CheckWatches(v.mod.Manifest(), p.host.mgr.GetCache().RESTMapper())
	if err != nil {
		return fmt.Errorf("plugin %q: %w", p.cfg.Name, err)
	}
	if len(unresolved) > 0 {
		return fmt.Errorf("plugin %q: cannot resolve %s to check its permissions: are their CRDs installed?", p.cfg.Name, kinds.GVKs(unresolved))
	}
	return nil
}

// NeedLeaderElection is true: plugins reconcile on the leader only.
func (p *Plugin) NeedLeaderElection() bool { return true }

// Start runs the plugin's controller until ctx is done, then lets go of the informers it read
// from. It can be started again (Host.Run does, as CRDs come and go); the module stays loaded
// until Close.
func (p *Plugin) Start(ctx context.Context) error {
	if err := p.checkWatches(); err != nil {
		return err
	}
	// Kinds served since the load are reviewed now, before their informers start, and so is
	// everything again after a restart: RBAC may have changed.
	if v := p.current.Load(); p.identity.access != nil {
		if err := p.checkReads(ctx, v.policy, v.mod.Manifest()); err != nil {
			return fmt.Errorf("plugin %q: %w", p.cfg.Name, err)
		}
	}
	if err := p.placeSources(); err != nil {
		return err
	}
	p.log.Info("plugin starting", "digest", p.Module().ShortDigest(), "for", kinds.String(p.forGVK.GroupVersion().String(), p.forGVK.Kind), "shards", p.sharding().String())
	if m := p.host.metrics; m != nil {
		m.RegisterPlugin(p.cfg.Name, p.stats)
		defer m.UnregisterPlugin(p.cfg.Name)
	}
	p.checkHealth() // its informers may be refused already, for another plugin
	resyncCtx, stopResync := context.WithCancel(ctx)
	resynced := make(chan struct{})
	go func() {
		defer close(resynced)
		p.resync(resyncCtx)
	}()
	err := p.ctrl.Start(ctx)
	stopResync()
	<-resynced
	// A shadow reconcile may outlive the worker that started it (up to the plugin's timeout):
	// its reads would take informers again after they are let go of.
	p.shadowing.Wait()
	p.infs.ReleaseAll(informers.Read)
	p.checkHealth() // what it read, it no longer needs
	return err
}

// Close closes the plugin's module and the versions it kept. Call it after the plugin has
// stopped for good.
//
// It waits for reconciles still running on the module at most until ctx ends, or, if ctx has
// no deadline, for the plugin's timeout and 5 s more; a module whose reconciles do not come back
// by then (a non-interruptible guest that loops) is closed when they do, and the error names it.
func (p *Plugin) Close(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.ReconcileTimeout()+5*time.Second)
		defer cancel()
	}
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	p.endRolloutLocked(p.ro.Load(), StageAborted, "the plugin stopped", false)
	first, err := p.kept.Close(ctx)
	if first { // the name is free once, for a plugin that may load under it next
		defer p.infs.Close() // and whatever still holds informers (a late shadow reconcile) lets go
		defer p.host.release(p.cfg.Name)
		defer p.identity.close()
		defer p.rec.close()
	}
	cur := p.current.Load()
	err = errors.Join(cur.mod.Close(ctx), err)
	cur.index.Close()
	return err
}

func (p *Plugin) interruptible() bool {
	return p.cfg.Interruptible == nil || *p.cfg.Interruptible
}

func (p *Plugin) isClosed() bool { return p.kept.Closed() }

// InFlight describes the plugin's reconciles running now: "name namespace/object (for 1.2s)".
func (p *Plugin) InFlight() []string {
	var out []string
	for _, f := range p.ctrl.InFlight() {
		out = append(out, fmt.Sprintf("%s %s (for %s)", p.cfg.Name, f.Request, time.Since(f.Since).Round(time.Millisecond)))
	}
	return out
}

// Running reports whether the plugin's controller runs: false while a kind it watches is not
// served (its CRD is missing), or on a replica that is not the leader.
func (p *Plugin) Running() bool { return p.running.Load() }

// Waiting lists, one line each, the kinds the plugin watches that the API server does not serve
// now, with what would serve each or what was most likely meant (crdwatch.Watcher.NotServed);
// none when its controller can run. It is the same on every replica.
func (p *Plugin) Waiting() []string { return p.host.crds.NotServed(p.Kinds()) }

// Kinds are the kinds the plugin watches: For, Owns and Watches.
func (p *Plugin) Kinds() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, k := range p.currentKeys() {
		if !slices.Contains(out, k.GroupVersionKind) {
			out = append(out, k.GroupVersionKind)
		}
	}
	return out
}

// currentKeys are the informers the plugin's sources use: the live version's, and those of a
// rollout's candidate whose watches differ.
func (p *Plugin) currentKeys() []cache.Key {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	keys := slices.Clone(p.keys)
	for _, k := range p.candKeys {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// maxErrorText bounds what of a plugin's error message the host keeps: its log, its object's
// status and its metrics see no more.
const maxErrorText = 1 << 10

// setKeys records the informers the sources watch through, srcs the live version's, cand a
// rollout candidate's (nil: none, or the live version's).
func (p *Plugin) setKeys(srcs, cand watches.Sources) {
	var candKeys []cache.Key
	if cand != nil {
		candKeys = cand.Keys()
	}
	keys := srcs.Keys()
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	p.keys, p.candKeys = keys, candKeys
}
