package plugin

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/crdwatch"
	"github.com/wasmrec/wasmrec/host/internal/filewatch"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/ownership"
	"github.com/wasmrec/wasmrec/host/plugin/internal/modsource"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm"
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
	recordings  string     // where plugins' recordings are kept ("": nowhere)
	recordMax   int64      // the most one plugin's may take
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
	// Recordings is the directory the plugins' recordings are kept in, each plugin's in a
	// directory of its name (Config.Record). Empty: the host records nothing, and refuses a
	// plugin whose settings ask it to.
	Recordings string
	// RecordingsMaxBytes bounds what one plugin's recordings may take (Config.Record.MaxBytes
	// may ask for less). Defaults to recording.DefaultMaxBytes.
	RecordingsMaxBytes int64
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
		oci: opts.OCI, share: opts.Share, warmStandby: opts.WarmStandby, impersonate: opts.Impersonate,
		recordings: opts.Recordings, recordMax: cmp.Or(opts.RecordingsMaxBytes, recording.DefaultMaxBytes)}
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

// Metrics is where the host reports, or nil.
func (h *Host) Metrics() *metrics.Metrics { return h.metrics }

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
		follows := []*crdwatch.Following{ctrl}
		if h.warmStandby {
			warm := crdwatch.Follow(h.crds, kinds, p.warm, log, nil)
			follows = append(follows, warm)
			if err := h.mgr.Add(warm); err != nil {
				return nil, err
			}
			added = append(added, warm)
		}
		p.setFollows(follows)
		s := &shared{p: p, ctrl: ctrl, table: h.share, log: log}
		if err := h.mgr.Add(s); err != nil {
			return added, err
		}
		return append(added, s), nil
	}
	if p.cfg.Shards > 1 {
		log.Info("shards is set, but this host does not share plugins (run --share-plugins): it runs the plugin whole", "shards", p.cfg.Shards)
	}
	warm := crdwatch.Follow(h.crds, kinds, p.warm, log, nil)
	p.setFollows([]*crdwatch.Following{warm, ctrl})
	if err := h.mgr.Add(warm); err != nil {
		return nil, err
	}
	if err := h.mgr.Add(ctrl); err != nil {
		return []manager.Runnable{warm}, err
	}
	return []manager.Runnable{warm, ctrl}, nil
}

// follow wraps the plugin's controller to run while its kinds are served, and to say so.
func (h *Host) follow(p *Plugin, kinds []schema.GroupVersionKind, log logr.Logger) *crdwatch.Following {
	var gauge interface{ Set(float64) }
	if h.metrics != nil {
		gauge = h.metrics.Running.WithLabelValues(p.cfg.Name)
		gauge.Set(0)
	}
	return crdwatch.Follow(h.crds, kinds, p, log, func(on bool) {
		p.running.Store(on)
		if gauge != nil {
			v := 0.0
			if on {
				v = 1
			}
			gauge.Set(v)
		}
		if p.cfg.Hooks.OnRunning != nil {
			p.cfg.Hooks.OnRunning(on)
		}
	})
}

// setFollows records what follows the plugin's kinds: a swap that changes them tells each.
func (p *Plugin) setFollows(f []*crdwatch.Following) {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	p.follows = f
}
