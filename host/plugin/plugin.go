package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/crdwatch"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/internal/filewatch"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/ownership"
	"github.com/wasmrec/wasmrec/host/plugin/internal/hostcalls"
	"github.com/wasmrec/wasmrec/host/plugin/internal/modsource"
	"github.com/wasmrec/wasmrec/host/plugin/internal/policy"
	"github.com/wasmrec/wasmrec/host/plugin/internal/versions"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/signature"
	"github.com/wasmrec/wasmrec/host/source"
	"github.com/wasmrec/wasmrec/host/tracing"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// Host loads plugins into a manager. One per process.
type Host struct {
	mgr         *manager.Manager
	engine      *wasm.Engine
	dynamic     dynamic.Interface // the Plugin resource's status writes
	objects     *object.Client    // guests' writes
	broadcaster record.EventBroadcaster
	metrics     *metrics.Metrics
	crds        *crdwatch.Watcher
	mapper      meta.RESTMapper                     // the cache's
	knownKind   func(schema.GroupKind, string) bool // answered without asking the API server; nil: unknown
	files       *filewatch.Watcher                  // follows every plugin's module file
	fetcher     modsource.Fetcher                   // reads modules
	oci         *oci.Client
	share       *ownership.Table
	warmStandby bool
	impersonate string
	signatures  Signatures // who must sign the modules
	namesMu     sync.Mutex
	names       map[string]string // plugin names claimed, and where their settings come from
	loaded      map[*Plugin]bool  // plugins loaded, until closed with no reconcile in flight
	log         logr.Logger
}

// HostOptions configure NewHost. Only Engine is required.
type HostOptions struct {
	// Engine compiles and runs the modules.
	Engine *wasm.Engine
	// Metrics, if set, reports the plugins. Defaults to no metrics.
	Metrics *metrics.Metrics
	// Logger defaults to logr.Discard().
	Logger logr.Logger
	// OCI pulls modules whose config names an oci:// reference. Defaults to a client with
	// oci.Options' defaults.
	OCI *oci.Client
	// Share, if set, shares the plugins with the other replicas of its group: each replica
	// runs the plugins and shards it holds the Leases of (see package ownership).
	Share *ownership.Table
	// WarmStandby, with Share, keeps synced the informers of the plugins and shards this replica
	// would take over first, so that it starts them on a warm cache.
	WarmStandby bool
	// Impersonate, if not empty, is the namespace of the host config's plugins'
	// ServiceAccounts: each such plugin's writes and events are made as its own (see
	// HostConfig.Impersonate).
	Impersonate string
	// Signatures is who must have signed the modules (HostSignatures.Compile). Defaults to
	// none: only plugins whose settings ask for signatures are checked.
	Signatures *Signatures
}

// withDefaults fills in what o leaves out.
func (o HostOptions) withDefaults() (HostOptions, error) {
	if o.Engine == nil {
		return o, errors.New("plugin host: HostOptions.Engine is required")
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.OCI == nil {
		c, err := oci.New(oci.Options{})
		if err != nil {
			return o, err
		}
		o.OCI = c
	}
	return o, nil
}

// NewHost returns a Host that runs plugins in mgr as opts say.
func NewHost(mgr *manager.Manager, opts HostOptions) (*Host, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	cfg := mgr.GetConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	objs, err := object.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	crds := crdwatch.NewWatcher(mgr.GetCache(), log.WithName("crds"))
	if err := mgr.Add(crds); err != nil {
		return nil, err
	}
	h := &Host{mgr: mgr, engine: opts.Engine, dynamic: dyn, objects: objs, broadcaster: b, metrics: opts.Metrics, crds: crds,
		mapper: mgr.GetCache().RESTMapper(), files: filewatch.New(log.WithName("files")), log: log,
		oci: opts.OCI, share: opts.Share, warmStandby: opts.WarmStandby, impersonate: opts.Impersonate}
	if opts.Signatures != nil {
		h.signatures = *opts.Signatures
	}
	mgr.GetCache().OnHealthChange(h.healthChanged)
	if cm, ok := h.mapper.(*cache.Mapper); ok {
		h.knownKind = cm.Known
		if m := opts.Metrics; m != nil {
			m.WatchDiscovery(cm.DiscoveryRequests)
		}
	}
	return h, nil
}

// Share is the Lease table the host shares plugins through; nil if it does not.
func (h *Host) Share() *ownership.Table { return h.share }

// Manager is the manager the host runs plugins in.
func (h *Host) Manager() *manager.Manager { return h.mgr }

// Logger is the host's logger.
func (h *Host) Logger() logr.Logger { return h.log }

// CRDs follows the CustomResourceDefinitions of the host's manager: what is served.
func (h *Host) CRDs() *crdwatch.Watcher { return h.crds }

// Recorder records events as the host, from component.
func (h *Host) Recorder(component string) record.EventRecorder {
	return h.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}

// Close stops the event broadcaster and the file watcher.
func (h *Host) Close() {
	h.broadcaster.Shutdown()
	_ = h.files.Close()
}

// version is a module serving a plugin and the policy its manifest and the grant make.
type version struct {
	mod    *wasm.Module
	policy *policy.Policy
}

// Plugin is a loaded plugin: a compiled module and the controller that runs it. It is a
// manager Runnable.
type Plugin struct {
	cfg     Config
	host    *Host
	current atomic.Pointer[version] // swapped whole; a reconcile keeps the one it started on
	swapMu  sync.Mutex              // one swap published at a time; guards srcs

	kept     versions.Kept // versions swapped out lately, and digests refused
	ctrl     *controller.Controller
	forGVK   schema.GroupVersionKind
	api      *hostcalls.API // the guest's host calls
	reader   *hostcalls.Reader
	identity *identity            // who the guest's API calls are made as
	checkers []*signature.Checker // who must have signed its modules (none: anyone)
	log      logr.Logger
	ids      atomic.Uint64
	watchMu  sync.Mutex         // guards keys
	keys     []cache.Key        // what the sources watch
	srcs     map[string]watched // the controller's sources; changed by swaps, under swapMu
	warm     *warmer
	follows  []*crdwatch.Following // the warmer's and the controller's; their kinds follow swaps

	source  atomic.Pointer[modsource.Source] // where the running module came from
	movedMu sync.Mutex                       // guards moved
	moved   chan struct{}                    // closed when source changes; see currentSource

	// OnSwap, if set, is told of every swap attempt.
	OnSwap func(SwapEvent)

	// ro is the rollout of a new version running now (nil: none); lastRollout the last that
	// ended. See Config.Rollout.
	ro          atomic.Pointer[rollingOut]
	lastRollout atomic.Pointer[RolloutStatus]
	// OnRollout, if set, is told when a rollout starts, moves on a step or ends. It is called
	// with the plugin's swap lock held: it must not block or call the plugin's swap methods.
	OnRollout func(RolloutEvent)

	// shards are the shards this replica runs (nil: the plugin is not split); wantShards those
	// it is to run from the controller's next start.
	shards     atomic.Pointer[hostcalls.Sharding]
	wantShards atomic.Pointer[[]int]
	held       atomic.Pointer[[]string] // see Held
	standby    atomic.Pointer[[]string] // the units this replica would take over first
	// claim is the plugin's units' claim while this replica shares plugins: its reconciles and
	// writes go on only while it is Fresh.
	claim atomic.Pointer[ownership.Claim]

	// running is whether the controller runs (false while a kind it watches is not served).
	running atomic.Bool
	// OnRunning, if set before Run, is told when the controller starts (true) or stops.
	OnRunning func(bool)

	health pluginHealth // what was said of informers it needs that the host may not list
	// OnUnavailable, if set before Run, is told Unavailable's new lines whenever they change
	// (none: it has all it needs again), in order, from the cache's goroutine or a reconcile's:
	// it must not block (enqueueing the Plugin object whose status says it is what it is for).
	OnUnavailable func([]string)

	failures failureStreak // reconciles failed since the last success
	// OnFailing, if set before Run, is told when Failing changes from "" or back to it, from a
	// reconcile's goroutine: it must not block.
	OnFailing func(string)
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
	return h.loadFrom(ctx, cfg, wasmBytes, src)
}

// loadFrom is Load of a module fetched from src, which becomes the plugin's source.
func (h *Host) loadFrom(ctx context.Context, cfg Config, wasmBytes []byte, src *modsource.Source) (*Plugin, error) {
	p, err := h.Load(ctx, cfg, wasmBytes)
	if p != nil {
		p.source.Store(src)
	}
	return p, err
}

// Load compiles and checks a module and builds its controller. The plugin runs once added to
// the manager. Every error names the plugin and says what to do. It checks no signature, as it
// has the bytes and not where they came from: FetchAndLoad and Supervise check what they fetch,
// and the plugin's triggers what they swap to.
func (h *Host) Load(ctx context.Context, cfg Config, wasmBytes []byte) (*Plugin, error) {
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
	p := &Plugin{cfg: cfg, host: h, log: log}
	p.source.Store(&modsource.Source{Ref: cfg.Module})
	checkers, err := h.checkers(cfg)
	if err != nil {
		return nil, err
	}
	p.checkers = checkers
	if cfg.Rollout != nil {
		h.oci.Keep(wasmBytes) // for a restart in the middle of a rollout (SuperviseOptions.Live)
	}
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
	if p.forGVK, err = parseGVK(m.For); err != nil {
		return refuse(fmt.Errorf("for: %w", err))
	}
	p.reader = hostcalls.NewReader(h.mgr.GetCache(), cfg.Namespaces)
	p.reader.OnAcquire = p.checkHealth
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
		if err := p.ctrl.Watch(w.src); err != nil {
			return fail(err)
		}
	}
	p.keys = keysOf(p.srcs)
	p.warm = &warmer{p: p}
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

// pruneLoaded forgets the plugins closed whose reconciles have all returned. A plugin closed
// while a guest still runs (one that loops, say) stays listed, so that a stop that times out
// can name it. The caller holds namesMu.
func (h *Host) pruneLoaded() {
	for p := range h.loaded {
		if p.isClosed() && len(p.ctrl.InFlight()) == 0 {
			delete(h.loaded, p)
		}
	}
}

// InFlight describes the reconciles running now in every plugin the host has loaded, from its
// config and from Plugin objects alike, closed ones included: "name namespace/object (for 1.2s)".
func (h *Host) InFlight() []string {
	h.namesMu.Lock()
	h.pruneLoaded()
	plugins := make([]*Plugin, 0, len(h.loaded))
	for p := range h.loaded {
		plugins = append(plugins, p)
	}
	h.namesMu.Unlock()
	slices.SortFunc(plugins, func(a, b *Plugin) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	var out []string
	for _, p := range plugins {
		out = append(out, p.InFlight()...)
	}
	return out
}

// claim takes cfg's name for its plugin: names are unique across the host config and Plugin
// objects (they name controllers, metrics and field managers).
func (h *Host) claim(cfg Config) error {
	h.namesMu.Lock()
	defer h.namesMu.Unlock()
	if owner, taken := h.names[cfg.Name]; taken {
		return fmt.Errorf("plugin %q: the name is taken by %s, and %s asks for it too: plugin names are unique in a host; rename one of them", cfg.Name, owner, cfg.originName())
	}
	if h.names == nil {
		h.names = map[string]string{}
	}
	h.names[cfg.Name] = cfg.originName()
	return nil
}

func (h *Host) release(name string) {
	h.namesMu.Lock()
	defer h.namesMu.Unlock()
	delete(h.names, name)
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return p.cfg.Name }

// Config is the plugin's settings.
func (p *Plugin) Config() Config { return p.cfg }

// Module is the plugin's compiled module.
func (p *Plugin) Module() *wasm.Module { return p.current.Load().mod }

// versionOf checks mod's manifest against the plugin's grant.
func (p *Plugin) versionOf(mod *wasm.Module) (*version, error) {
	pol, err := policy.New(p.cfg.Name, p.cfg.Permissions, mod.Manifest().Permissions, p.cfg.Namespaces)
	if err != nil {
		return nil, err
	}
	pol.Confined = p.cfg.Confined
	return &version{mod: mod, policy: pol}, nil
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
	if err := p.applyShards(); err != nil {
		return err
	}
	p.log.Info("plugin starting", "digest", p.Module().ShortDigest(), "for", kinds.String(p.forGVK.GroupVersion().String(), p.forGVK.Kind), "shards", p.sharding().String())
	if m := p.host.metrics; m != nil {
		m.RegisterPlugin(p.cfg.Name, p.stats)
		defer m.UnregisterPlugin(p.cfg.Name)
	}
	p.checkHealth() // its informers may be refused already, for another plugin
	err := p.ctrl.Start(ctx)
	p.reader.ReleaseAll()
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
		defer p.host.release(p.cfg.Name)
		defer p.identity.close()
	}
	return errors.Join(p.Module().Close(ctx), err)
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
	keys := slices.Clone(p.keys)
	p.watchMu.Unlock()
	for _, k := range p.rolloutKeys() {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// warmer holds the informers a plugin's sources use on every replica, leader or not, so a
// follower's caches are synced when it takes over.
type warmer struct {
	p    *Plugin
	mu   sync.Mutex
	held map[cache.Key]*cache.Informer // nil while not running
}

func (w *warmer) Name() string             { return w.p.cfg.Name + " (informers)" }
func (w *warmer) NeedLeaderElection() bool { return false }
func (w *warmer) Start(ctx context.Context) error {
	if err := w.p.checkWatches(); err != nil {
		return err
	}
	w.mu.Lock()
	w.held = map[cache.Key]*cache.Informer{}
	err := w.holdLocked(w.wanted())
	w.mu.Unlock()
	w.p.checkHealth() // they may be refused already, for another plugin
	if err == nil {
		<-ctx.Done()
	}
	w.mu.Lock()
	for _, inf := range w.held {
		inf.Release()
	}
	w.held = nil
	w.mu.Unlock()
	return err
}

// keys are the keys of the informers the warmer holds (as the cache keys them).
func (w *warmer) keys() []cache.Key {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]cache.Key, 0, len(w.held))
	for _, inf := range w.held {
		keys = append(keys, inf.Key())
	}
	return keys
}

// wanted are the informers the warmer holds: those of the plugin's sources; on a replica that
// shares plugins, those of the plugin or shards it would take over first (warm standby).
func (w *warmer) wanted() []cache.Key {
	if w.p.host.share != nil {
		return w.p.standbyKeys()
	}
	return w.p.currentKeys()
}

// update holds exactly keys (on a replica that shares plugins, what it stands by for), if the
// warmer runs.
func (w *warmer) update(keys []cache.Key) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held == nil {
		return nil
	}
	if w.p.host.share != nil {
		keys = w.wanted()
	}
	return w.holdLocked(keys)
}

// hold acquires the informers of keys too, keeping those it holds, if the warmer runs.
func (w *warmer) hold(keys []cache.Key) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held == nil {
		return nil
	}
	return w.holdLocked(append(slices.Collect(maps.Keys(w.held)), keys...))
}

// waitForSync waits until every informer held has synced; one whose list the API server
// refuses the host fails it at once.
func (w *warmer) waitForSync(ctx context.Context) error {
	w.mu.Lock()
	infs := slices.Collect(maps.Values(w.held))
	w.mu.Unlock()
	for _, inf := range infs {
		if err := inf.WaitForSyncUnlessRefused(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (w *warmer) holdLocked(keys []cache.Key) error {
	for _, k := range keys {
		if _, ok := w.held[k]; ok {
			continue
		}
		inf, err := w.p.host.mgr.GetCache().Acquire(k)
		if err != nil {
			return err
		}
		w.held[k] = inf
	}
	for k, inf := range w.held {
		if !slices.Contains(keys, k) {
			inf.Release()
			delete(w.held, k)
		}
	}
	return nil
}

// Forget drops what the host keeps of a plugin gone for good (its object deleted, not a
// reload): the series of its metrics. Call it once the plugin has stopped.
func (h *Host) Forget(name string) {
	if h.metrics != nil {
		h.metrics.Forget(name)
	}
}

// Run adds the plugin to the manager: its controller (on the leader) and its informers (on
// every replica), each running only while every kind the plugin watches is served. It returns
// what it added, for the manager's Remove.
//
// With Share set, it adds one runnable instead, on every replica: it runs the controller while
// this replica holds any of the plugin's units, with the shards it holds.
func (h *Host) Run(p *Plugin) ([]manager.Runnable, error) {
	kinds := p.Kinds()
	log := h.log.WithValues("plugin", p.cfg.Name)
	ctrl := h.follow(p, kinds, log)
	if h.share != nil {
		var added []manager.Runnable
		p.follows = []*crdwatch.Following{ctrl}
		if h.warmStandby {
			warm := crdwatch.Follow(h.crds, kinds, p.warm, log)
			if err := h.mgr.Add(warm); err != nil {
				return nil, err
			}
			added = append(added, warm)
			p.follows = append(p.follows, warm)
		}
		s := &shared{p: p, ctrl: ctrl, table: h.share, log: log}
		if err := h.mgr.Add(s); err != nil {
			return added, err
		}
		return append(added, s), nil
	}
	if p.cfg.Shards > 1 {
		log.Info("shards is set, but this host does not share plugins (run --share-plugins): it runs the plugin whole", "shards", p.cfg.Shards)
	}
	warm := crdwatch.Follow(h.crds, kinds, p.warm, log)
	if err := h.mgr.Add(warm); err != nil {
		return nil, err
	}
	p.follows = []*crdwatch.Following{warm, ctrl}
	if err := h.mgr.Add(ctrl); err != nil {
		return []manager.Runnable{warm}, err
	}
	return []manager.Runnable{warm, ctrl}, nil
}

// follow wraps the plugin's controller to run while its kinds are served, and to say so.
func (h *Host) follow(p *Plugin, kinds []schema.GroupVersionKind, log logr.Logger) *crdwatch.Following {
	ctrl := crdwatch.Follow(h.crds, kinds, p, log)
	var gauge interface{ Set(float64) }
	if h.metrics != nil {
		gauge = h.metrics.Running.WithLabelValues(p.cfg.Name)
		gauge.Set(0)
	}
	ctrl.OnState = func(on bool) {
		p.running.Store(on)
		if gauge != nil {
			v := 0.0
			if on {
				v = 1
			}
			gauge.Set(v)
		}
		if p.OnRunning != nil {
			p.OnRunning(on)
		}
	}
	return ctrl
}

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
	return metrics.PluginStats{
		Digest: mod.Digest(), Instances: int(s.Live.Load()), InstanceMemoryBytes: mem,
		Traps: s.Traps.Load(), Timeouts: s.Timeouts.Load(), BadResults: s.BadResults.Load(),
		Instantiated: s.Instantiated.Load(), Discarded: s.Discarded.Load(), Rec: s.Recycled.Load(),
		LogDroppedLines: s.LogDroppedLines.Load(), LogDroppedBytes: s.LogDroppedBytes.Load(),
	}
}

// owned reports whether this replica may act for the plugin now: always, unless it shares
// plugins and its hold on the plugin's units has gone stale (see ownership.Claim.Fresh).
func (p *Plugin) owned() bool {
	c := p.claim.Load()
	return c == nil || c.Fresh()
}

// Reconcile runs one reconcile in the plugin.
func (p *Plugin) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !p.owned() {
		// The controller is being stopped: the unit is another replica's, or about to be.
		p.log.V(1).Info("not reconciling: this replica's Lease on the plugin went unrenewed past the renew deadline", "request", req.String())
		return reconcile.Result{}, nil
	}
	id := fmt.Sprintf("%s-%d", p.cfg.Name, p.ids.Add(1))
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
	if ro := p.ro.Load(); ro != nil {
		res, err = p.reconcileRolling(ctx, req, ro, call, log)
	} else {
		res, _, err = p.run(ctx, req, call, nil, true, log, nil)
	}
	switch {
	case errors.Is(err, wasm.ErrTimedOut):
		err = &timedOut{plugin: p.cfg.Name, timeout: p.cfg.ReconcileTimeout(), err: err}
	case err != nil:
	case res.Failed && res.Terminal:
		err = reconcile.TerminalError(fmt.Errorf("plugin %q: %s", p.cfg.Name, clip(res.Err)))
	case res.Failed:
		err = fmt.Errorf("plugin %q: %s", p.cfg.Name, clip(res.Err))
	}
	p.failures.record(err, p.OnFailing)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{Requeue: res.Requeue, RequeueAfter: res.RequeueAfter}, nil
}

// timedOut is a reconcile the host stopped at the plugin's timeout, said in the terms of the
// setting an author or operator changes. It wraps what the module reported (wasm.ErrTimedOut)
// and context.DeadlineExceeded, so that the controller does not say it again.
type timedOut struct {
	plugin  string
	timeout time.Duration
	err     error
}

func (e *timedOut) Error() string {
	return fmt.Sprintf("plugin %q: reconcile timed out after %s, the plugin's timeout (timeout in host.yaml, spec.timeout of its Plugin or ClusterPlugin), and was stopped: make the reconcile return sooner, or raise the timeout",
		e.plugin, e.timeout)
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
		c := &hostcalls.Calls{API: p.api, Policy: cur.policy, Req: req}
		if calls != nil {
			calls(c)
		}
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(tracing.Digest.String(cur.mod.Digest()))
		}
		res, err := cur.mod.Reconcile(ctx, &wasm.Call{Request: call, Host: c, Logger: log.WithValues("digest", cur.mod.ShortDigest())})
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

// watched is one source of the controller and the informer it uses.
type watched struct {
	key cache.Key
	src source.Source
}

// sourcesFor builds the sources a manifest asks for, keyed by what each watches and how, so
// that two manifests can be compared source by source.
func (p *Plugin) sourcesFor(m *abi.Manifest) (map[string]watched, error) {
	c := p.host.mgr.GetCache()
	out := map[string]watched{}
	add := func(role string, w abi.Watch, metadataOnly bool, h handler.EventHandler) error {
		gvk, err := parseGVK(w)
		if err != nil {
			return err
		}
		preds, err := predicates(w.Predicates)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk.Kind, err)
		}
		if len(p.cfg.Namespaces) > 0 { // cluster-scoped objects are not limited by namespaces
			preds = append(preds, predicate.NewPredicateFuncs(func(o event.Object) bool {
				return o.GetNamespace() == "" || slices.Contains(p.cfg.Namespaces, o.GetNamespace())
			}))
		}
		if role != "for" {
			h = p.shardFilter(h) // a watched object may map to a For object of any shard
		}
		// A plugin limited to namespaces watches through informers of those namespaces only.
		for _, key := range p.keysFor(gvk, metadataOnly) {
			id, _ := json.Marshal(struct {
				Role      string
				Watch     abi.Watch
				Namespace string `json:",omitempty"`
				Shard     string `json:",omitempty"`
			}{role, w, key.Namespace, key.Shard.String()})
			out[string(id)] = watched{key: key, src: source.Kind(c, key, h, preds...)}
		}
		return nil
	}
	if err := add("for", m.For, false, handler.EnqueueRequestForObject()); err != nil {
		return nil, fmt.Errorf("for: %w", err)
	}
	for i, w := range m.Owns {
		owns := handler.EnqueueRequestForOwner(c.RESTMapper(), p.forGVK.GroupKind(), handler.OnlyControllerOwner())
		if err := add("owns", w, true, owns); err != nil {
			return nil, fmt.Errorf("owns[%d]: %w", i, err)
		}
	}
	for i, w := range m.Watches {
		if err := add("watches", w, false, handler.EnqueueRequestsFromMapFunc(p.mapper(w.Map))); err != nil {
			return nil, fmt.Errorf("watches[%d]: %w", i, err)
		}
	}
	return out, nil
}

// keysFor are the informers the plugin watches gvk through: one per namespace of the plugin,
// or one for all (no namespaces, or a kind the API server says is cluster-scoped).
// A sharded plugin watches the kinds it splits through informers of the shards it runs.
func (p *Plugin) keysFor(gvk schema.GroupVersionKind, metadataOnly bool) []cache.Key {
	return p.keysWithSharding(gvk, metadataOnly, p.sharding())
}

func (p *Plugin) keysWithSharding(gvk schema.GroupVersionKind, metadataOnly bool, sh hostcalls.Sharding) []cache.Key {
	if m, err := p.host.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil && m.Scope.Name() != meta.RESTScopeNameNamespace {
		return hostcalls.Keys(gvk, metadataOnly, nil, sh.Shards(gvk, false))
	}
	return hostcalls.Keys(gvk, metadataOnly, p.cfg.Namespaces, sh.Shards(gvk, true))
}

// keysOf lists the distinct informers sources use, in a stable order.
func keysOf(ws map[string]watched) []cache.Key {
	var keys []cache.Key
	for _, w := range ws {
		if !slices.Contains(keys, w.key) {
			keys = append(keys, w.key)
		}
	}
	slices.SortFunc(keys, func(a, b cache.Key) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// mapper maps a watched object to For requests.
func (p *Plugin) mapper(mode string) handler.MapFunc {
	if mode == abi.MapSameName {
		return func(_ context.Context, o event.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
		}
	}
	return func(ctx context.Context, o event.Object) []reconcile.Request { // abi.MapNamespace
		objs, err := p.reader.List(ctx, p.forGVK, o.GetNamespace(), nil)
		if err != nil {
			p.log.Error(err, "mapping an event to the objects in its namespace")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(objs))
		for _, obj := range objs {
			m := obj.(metav1.Object)
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
		}
		return reqs
	}
}

func parseGVK(w abi.Watch) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(w.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", w.APIVersion, err)
	}
	return gv.WithKind(w.Kind), nil
}

// predicates converts the manifest's predicates.
func predicates(ps []abi.Predicate) ([]predicate.Predicate, error) {
	out := make([]predicate.Predicate, 0, len(ps))
	for _, p := range ps {
		q, err := convertPredicate(p)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

func convertPredicate(p abi.Predicate) (predicate.Predicate, error) {
	switch p.Type {
	case abi.PredicateGenerationChanged:
		return predicate.GenerationChanged(), nil
	case abi.PredicateAnnotationChanged:
		return predicate.AnnotationChanged(), nil
	case abi.PredicateLabelChanged:
		return predicate.LabelChanged(), nil
	case abi.PredicateNamespace:
		return predicate.Namespace(p.Namespaces...), nil
	case abi.PredicateLabelSelector:
		var sel metav1.LabelSelector
		b, _ := json.Marshal(p.Selector)
		if err := json.Unmarshal(b, &sel); err != nil {
			return nil, err
		}
		return predicate.LabelSelector(sel)
	case abi.PredicateAnd, abi.PredicateOr, abi.PredicateNot:
		inner, err := predicates(p.Predicates)
		if err != nil {
			return nil, err
		}
		switch p.Type {
		case abi.PredicateAnd:
			return predicate.And(inner...), nil
		case abi.PredicateOr:
			return predicate.Or(inner...), nil
		}
		return predicate.Not(inner[0]), nil
	}
	return nil, fmt.Errorf("unknown predicate type %q", p.Type)
}

func rateLimiter(c RateLimiterConfig) workqueue.TypedRateLimiter[reconcile.Request] {
	if c == (RateLimiterConfig{}) {
		return nil // the controller's default, fresh per start
	}
	base, maxDelay := controller.DefaultBaseDelay, controller.DefaultMaxDelay
	if c.BaseDelay != nil {
		base = c.BaseDelay.Duration
	}
	if c.MaxDelay != nil {
		maxDelay = c.MaxDelay.Duration
	}
	qps, burst := float64(controller.DefaultQPS), controller.DefaultBurst
	if c.QPS > 0 {
		qps = c.QPS
	}
	if c.Burst > 0 {
		burst = c.Burst
	}
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](base, maxDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(qps), burst)},
	)
}

// maxErrorText bounds what of a plugin's error message the host keeps: its log, its object's
// status and its metrics see no more.
const maxErrorText = 1 << 10

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
