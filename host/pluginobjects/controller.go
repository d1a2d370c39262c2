package pluginobjects

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/crdwatch"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// CRD holds the CustomResourceDefinitions of Plugin and ClusterPlugin (wasmrec.dev, v1alpha1).
//
//go:embed plugins.crd.yaml
var CRD []byte

// The kinds: Plugin is namespaced, ClusterPlugin cluster-scoped.
var (
	GVK        = schema.GroupVersionKind{Group: "wasmrec.dev", Version: "v1alpha1", Kind: "Plugin"}
	GVR        = GVK.GroupVersion().WithResource("plugins")
	ClusterGVK = GVK.GroupVersion().WithKind("ClusterPlugin")
	ClusterGVR = GVK.GroupVersion().WithResource("clusterplugins")
)

// describe names an object as messages do: "Plugin team-a/labeler", "ClusterPlugin labeler".
func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("Plugin %s/%s", ns, u.GetName())
	}
	return "ClusterPlugin " + u.GetName()
}

// PluginName is the name of the plugin an object runs: a ClusterPlugin's name, or
// "namespace.name" for a Plugin (plugin names are unique in a host).
func PluginName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

// Options configure New.
type Options struct {
	// Logger defaults to the host's.
	Logger logr.Logger
	// Policy is what the operator lets plugin objects do (sources, bounds).
	Policy plugin.ObjectPolicy
}

// New returns the controller that runs the plugins plugin objects describe, in h. It supervises
// a plugin when its object appears, swaps its module when spec.module changes, starts it anew
// when another setting changes, stops it when paused or deleted, and reports in the object's
// status (Ready, Degraded, Running, activeDigest) and in Events on it. Add it to h's manager; it
// waits while the CRDs are not installed.
//
// It runs on every replica, so that a follower loads the same plugins and keeps their informers
// warm; their controllers run on the leader only, and only the leader writes status and Events.
func New(h *plugin.Host, opts Options) (manager.Runnable, error) {
	if opts.Logger.GetSink() == nil {
		opts.Logger = h.Logger().WithName("plugins")
	}
	opts.Policy = opts.Policy.WithDefaults()
	if err := opts.Policy.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	mgr := h.Manager()
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	r := &resources{host: h, mgr: mgr, dynamic: dyn, log: log, policy: opts.Policy, cpu: map[string]*wasm.CPUShare{}, running: map[string]*objectRun{}, overBudget: map[reconcile.Request]need{},
		recorder: h.Recorder("wasmrec")}
	// Several workers: a load compiles, and one slow plugin must not hold the others back.
	ctrl, err := controller.New("plugins", r, controller.Options{Logger: log, MaxConcurrentReconciles: 4})
	if err != nil {
		return nil, err
	}
	// Status writes do not change the generation; spec changes and deletions pass.
	// The rollout annotation is an operator's word on a rollout: it passes too.
	for _, gvk := range []schema.GroupVersionKind{GVK, ClusterGVK} {
		if err := ctrl.Watch(source.Kind(mgr.GetCache(), cache.Key{GroupVersionKind: gvk}, handler.EnqueueRequestForObject(), predicate.Or(predicate.GenerationChanged(), predicate.AnnotationChanged()))); err != nil {
			return nil, err
		}
	}
	r.ctrl = ctrl
	if m := h.Metrics(); m != nil {
		p := opts.Policy
		m.WatchPluginObjectBudgets(metrics.Budgets{MemoryBytes: p.MemoryBudget.Value(), NamespaceMemoryBytes: p.NamespaceMemoryBudget.Value(),
			Units: p.UnitBudget, NamespaceUnits: p.NamespaceUnitBudget}, r.budgetUse)
	}
	return crdwatch.Follow(h.CRDs(), []schema.GroupVersionKind{GVK, ClusterGVK}, &resourcesRunnable{r: r, ctrl: ctrl}, log, nil), nil
}

// resourcesRunnable runs the plugin objects' controller and unloads every plugin when it stops
// (the CRDs went away, or the host stops).
type resourcesRunnable struct {
	r    *resources
	ctrl *controller.Controller
}

func (rr *resourcesRunnable) Name() string { return "plugins" }

// NeedLeaderElection is false: every replica loads the plugins (see New).
func (rr *resourcesRunnable) NeedLeaderElection() bool { return false }

func (rr *resourcesRunnable) Start(ctx context.Context) error {
	c := rr.r.mgr.GetCache()
	namespaced, err := c.Acquire(cache.Key{GroupVersionKind: GVK})
	if err != nil {
		return err
	}
	defer namespaced.Release()
	cluster, err := c.Acquire(cache.Key{GroupVersionKind: ClusterGVK})
	if err != nil {
		return err
	}
	defer cluster.Release()
	rr.r.reads.Store(&informers{namespaced: namespaced, cluster: cluster})
	defer rr.r.reads.Store(nil)
	// A follower that becomes the leader writes every object's status: it wrote none so far.
	// (Objects reconciled after the election write it anyway; this covers the ones before.)
	done := make(chan struct{})
	var wg sync.WaitGroup
	all := func() {
		for _, inf := range []*cache.Informer{namespaced, cluster} {
			objs, _ := inf.List("", nil)
			for _, o := range objs {
				m := o.(metav1.Object)
				rr.ctrl.Enqueue(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
			}
		}
	}
	wg.Go(func() {
		select {
		case <-done:
			return
		case <-rr.r.mgr.Elected():
		}
		all()
	})
	// Replicas that share plugins: when one comes or goes, every status is written again, so
	// that status.replicas drops the replicas gone and the reporter writes the conditions.
	if t := rr.r.host.Share(); t != nil {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				case <-t.ReplicasChanged():
				}
				all()
			}
		})
	}
	err = rr.ctrl.Start(ctx)
	close(done)
	wg.Wait()
	rr.r.unloadAll(context.WithoutCancel(ctx))
	return err
}

// informers are the plugin objects' informers, held while the controller runs.
type informers struct{ namespaced, cluster *cache.Informer }

// get returns the object of req, and its spec's JSON as the API server sent it.
func (i *informers) get(req reconcile.Request) (*unstructured.Unstructured, json.RawMessage, error) {
	inf := i.cluster
	if req.Namespace != "" {
		inf = i.namespaced
	}
	obj, err := inf.Get(req.Namespace, req.Name)
	if err != nil {
		return nil, nil, err
	}
	o := obj.(*object.Object)
	u, err := o.Unstructured()
	if err != nil {
		return nil, nil, err
	}
	var spec struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(o.Raw, &spec); err != nil {
		return nil, nil, err
	}
	return u, spec.Spec, nil
}

type resources struct {
	host     *plugin.Host
	mgr      *manager.Manager
	dynamic  dynamic.Interface // status writes
	log      logr.Logger
	policy   plugin.ObjectPolicy
	ctrl     *controller.Controller
	recorder record.EventRecorder
	reads    atomic.Pointer[informers]

	mu         sync.Mutex
	cpu        map[string]*wasm.CPUShare  // each namespace's share of the host's cores
	running    map[string]*objectRun      // by plugin name
	overBudget map[reconcile.Request]need // objects refused for memory or units: tried again once they fit
}

// failure is why an object's plugin is not loaded, as its status says it.
type failure struct {
	reason   string // Invalid, FetchFailed, Refused, LoadFailed, OverBudget or StartFailed
	msg      string
	refusals int64 // modules refused, over the object's life
}

func (r *resources) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	reads := r.reads.Load()
	if reads == nil {
		return reconcile.Result{}, fmt.Errorf("the plugin objects' informers are not held")
	}
	name := PluginName(req.Namespace, req.Name)
	u, rawSpec, err := reads.get(req)
	if apierrors.IsNotFound(err) {
		r.mu.Lock()
		delete(r.overBudget, req)
		r.mu.Unlock()
		r.unload(ctx, name, nil)
		r.host.Forget(name) // its series go with it
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	spec, err := specOf(describe(u), rawSpec) // decoded once, from the API server's JSON
	var (
		cfg    plugin.Config
		paused bool
	)
	if err == nil {
		cfg, paused, err = configOf(u, spec)
	}
	if err == nil && !paused {
		err = r.policy.Admit(describe(u), u.GetNamespace(), cfg)
	}
	if err == nil && !paused {
		err = cfg.Validate()
	}
	// Its module is read within the operator's directories and size bound.
	cfg.SourceDirs = r.policy.Dirs(u.GetNamespace())
	if cfg.MaxModuleSize == nil {
		cfg.MaxModuleSize = r.policy.MaxModuleSize
	}
	if rec := cfg.Record; rec != nil && rec.MaxBytes == nil {
		bounded := *rec
		bounded.MaxBytes = r.policy.MaxRecordBytes
		cfg.Record = &bounded
	}
	if ns := u.GetNamespace(); ns != "" {
		cfg.CPU = r.cpuShare(ns)
	}
	if err != nil {
		r.unload(ctx, name, u)
		return reconcile.Result{}, r.refuse(ctx, u, "Invalid", err)
	}
	if paused {
		r.unload(ctx, name, u)
		return reconcile.Result{}, r.status(ctx, u, nil, nil)
	}
	settings := settingsOf(spec)

	r.mu.Lock()
	l := r.running[name]
	r.mu.Unlock()
	if l != nil && (l.settings != settings || (l.sup.State().Plugin == nil && l.module != cfg.Module)) {
		r.unload(ctx, name, u) // other settings, or a module that never loaded: start anew
		l = nil
	}
	if l == nil {
		// The counts are the object's: a reload, a restart or a new leader carries them on.
		swaps, _, _ := unstructured.NestedInt64(u.Object, "status", "swaps")
		refusals, _, _ := unstructured.NestedInt64(u.Object, "status", "refusals")
		live, _, _ := unstructured.NestedString(u.Object, "status", "activeDigest")
		units := cfg.Units()
		if r.host.Share() == nil {
			units = 1 // a host that does not share plugins runs a sharded one whole, with no Lease
		}
		l = &objectRun{req: req, settings: settings, module: cfg.Module, memory: cfg.Memory(), units: units, swaps: swaps, refusals: refusals}
		again := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}}
		cfg.Code = codeBudget{r: r, l: l, name: name, what: describe(u)}
		l.sup = r.host.Supervise(cfg, plugin.SuperviseOptions{
			OnState: func(plugin.State) { r.ctrl.Enqueue(again) },
			Hooks: plugin.Hooks{
				OnSwap:    r.onSwap(u, l),
				OnRollout: r.onRollout(u, l),
				OnRunning: func(bool) { r.ctrl.Enqueue(again) },
				// A kind it needs that the host cannot list makes it Degraded, naming what is
				// missing.
				OnUnavailable: func([]string) { r.ctrl.Enqueue(again) },
				// So does a plugin failing every reconcile, until one succeeds.
				OnFailing: func(string) { r.ctrl.Enqueue(again) },
				// What its map function named that it may not reconcile, which the tenant
				// could see only in the host's log.
				OnDropped: func(msg string) { r.event(u, corev1.EventTypeWarning, "MapRequestDropped", "%s", msg) },
				// And a field index the memory budget has no room for: the plugin works, its
				// lists slower, and only the host's log and metrics would say why.
				OnIndexRefused: func(refused bool) {
					if refused {
						r.event(u, corev1.EventTypeWarning, ReasonIndexOverBudget, "the memory budget has no room for the values of its field indexes: each list hands it every item until there is room")
					}
					r.ctrl.Enqueue(again)
				},
			},
			Reporting: r.leading,
			Live:      live, // a rollout the host was in the middle of starts again
		})
		if err := r.reserve(u, name, l); err != nil {
			return reconcile.Result{}, r.refuse(ctx, u, plugin.ReasonOverBudget, err)
		}
		if err := r.mgr.Add(l.sup); err != nil {
			r.unload(ctx, name, u)
			return reconcile.Result{}, r.refuse(ctx, u, plugin.ReasonStartFailed, err)
		}
	}
	st := l.sup.State()
	if st.Plugin == nil {
		return reconcile.Result{}, r.notLoaded(ctx, u, l, st)
	}
	p := st.Plugin
	if l.announce() {
		r.event(u, corev1.EventTypeNormal, "Loaded", "running %s (%s) as %s", p.ModuleRef(), p.Module().Digest(), cfg.ServiceAccount.User())
	}
	r.rolloutAction(u, p)
	switch module := cfg.Module; {
	case p.ModuleRef() != module:
		if wait := l.moveTo(module); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, r.status(ctx, u, l, nil)
		}
		if err := p.SwapTo(ctx, module); err != nil {
			why := "" // not a refusal of the module, which OnSwap was told
			switch {
			case errors.As(err, new(*plugin.FetchError)):
				why = plugin.ReasonFetchFailed
			case errors.As(err, new(*wasm.BudgetError)):
				why = plugin.ReasonOverBudget
			}
			delay, news := l.moveFailed(err, why)
			if news {
				if r.leading() && why == plugin.ReasonFetchFailed {
					r.log.Error(err, "the plugin object's module could not be fetched; the current module keeps serving, and it is tried again with backoff", "plugin", cfg.Name, "serving", p.Module().Digest(), "next", delay.Round(time.Millisecond))
				}
				r.event(u, corev1.EventTypeWarning, why, "%s keeps serving: %v", p.Module().Digest(), err)
			}
			return reconcile.Result{RequeueAfter: delay}, r.status(ctx, u, l, nil)
		}
		l.moveDone()
	default:
		l.moveOver() // spec.module is the module serving: a failed move to another one is over
	}
	if ro := p.Rollout(); ro != nil && ro.Active() { // its figures, fresh in status
		return reconcile.Result{RequeueAfter: rolloutStatusEvery}, r.status(ctx, u, l, nil)
	}
	return reconcile.Result{}, r.status(ctx, u, l, nil)
}

// rolloutStatusEvery is how often the status of a plugin rolling out a new version is written.
const rolloutStatusEvery = 2 * time.Second

// unload stops an object's plugin: its supervisor removes it from the manager and closes it.
func (r *resources) unload(ctx context.Context, name string, u *unstructured.Unstructured) {
	r.mu.Lock()
	l := r.running[name]
	delete(r.running, name)
	r.mu.Unlock()
	if l == nil {
		return
	}
	defer r.roomMade() // its memory and units are free: the objects waiting for them try again
	p := l.sup.State().Plugin
	// The supervisor waits for a guest that loops without being interruptible at most its
	// timeout and 5 s more; so does this.
	cfg := l.sup.Config()
	ctx, cancel := context.WithTimeout(ctx, cfg.ReconcileTimeout()+10*time.Second)
	defer cancel()
	if err := r.mgr.Remove(ctx, l.sup); err != nil && !errors.Is(err, manager.ErrStopping) {
		r.log.Error(err, "stopping a plugin", "plugin", name)
	}
	if p == nil {
		return
	}
	r.log.Info("plugin unloaded", "plugin", name)
	if u != nil {
		r.event(u, corev1.EventTypeNormal, "Unloaded", "stopped %s", p.Module().Digest())
	}
}

func (r *resources) unloadAll(ctx context.Context) {
	r.mu.Lock()
	names := make([]string, 0, len(r.running))
	for n := range r.running {
		names = append(names, n)
	}
	r.mu.Unlock()
	for _, n := range names {
		r.unload(ctx, n, nil)
	}
}
