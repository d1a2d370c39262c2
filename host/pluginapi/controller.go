package pluginapi

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/crdwatch"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/backoff"
	"github.com/wasmrec/wasmrec/internal/kinds"
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

// ConfigOf returns the settings a plugin object gives its plugin, and whether it is paused. A
// Plugin's plugin acts as spec.serviceAccountName of its namespace and is confined to that
// namespace; a ClusterPlugin's acts as spec.serviceAccount and reaches spec.namespaces (all if
// none). Unknown fields, and fields only the operator may set, are refused.
func ConfigOf(u *unstructured.Unstructured) (cfg plugin.Config, paused bool, err error) {
	what := describe(u)
	var spec pluginSpec
	raw, _ := json.Marshal(u.Object["spec"])
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return plugin.Config{}, false, fmt.Errorf("%s: spec is not a plugin's settings: %v: fix the object", what, err)
	}
	cfg = spec.Config
	cfg.Origin = what
	if ns := u.GetNamespace(); ns != "" {
		cfg.Name = PluginName(ns, u.GetName())
		switch {
		case spec.ServiceAccount != nil:
			return cfg, false, fmt.Errorf("%s: spec.serviceAccount is a ClusterPlugin's: a Plugin acts as spec.serviceAccountName, a ServiceAccount of its own namespace", what)
		case len(cfg.Namespaces) > 0:
			return cfg, false, fmt.Errorf("%s: spec.namespaces is a ClusterPlugin's: a Plugin reaches its own namespace only", what)
		case spec.ServiceAccountName == "":
			return cfg, false, fmt.Errorf("%s: spec.serviceAccountName is required: the ServiceAccount of namespace %s the plugin acts as", what, ns)
		}
		cfg.ServiceAccount = &plugin.ServiceAccountRef{Namespace: ns, Name: spec.ServiceAccountName}
		cfg.Namespaces, cfg.Confined = []string{ns}, true
	} else {
		cfg.Name = u.GetName()
		switch {
		case spec.ServiceAccountName != "":
			return cfg, false, fmt.Errorf("%s: spec.serviceAccountName is a Plugin's: a ClusterPlugin names spec.serviceAccount {namespace, name}", what)
		case spec.ServiceAccount == nil || spec.ServiceAccount.Namespace == "" || spec.ServiceAccount.Name == "":
			return cfg, false, fmt.Errorf("%s: spec.serviceAccount {namespace, name} is required: the ServiceAccount the plugin acts as", what)
		}
		cfg.ServiceAccount = spec.ServiceAccount
	}
	if sa := cfg.ServiceAccount; len(validation.IsDNS1123Subdomain(sa.Name)) > 0 || len(validation.IsDNS1123Label(sa.Namespace)) > 0 {
		return cfg, false, fmt.Errorf("%s: ServiceAccount %s/%s: not a valid name", what, sa.Namespace, sa.Name)
	}
	return cfg, spec.Paused, nil
}

// pluginSpec is a plugin object's spec: a Config without its name, who it acts as, and paused.
type pluginSpec struct {
	plugin.Config                                // its fields are the spec's; name comes from the object
	ServiceAccountName string                    `json:"serviceAccountName,omitempty"` // Plugin
	ServiceAccount     *plugin.ServiceAccountRef `json:"serviceAccount,omitempty"`     // ClusterPlugin
	Paused             bool                      `json:"paused,omitempty"`
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
	r := &resources{host: h, mgr: mgr, dynamic: dyn, log: log, policy: opts.Policy, cpu: map[string]*wasm.CPUShare{}, running: map[string]*loaded{}, overBudget: map[reconcile.Request]bool{},
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
	return crdwatch.Follow(h.CRDs(), []schema.GroupVersionKind{GVK, ClusterGVK}, &resourcesRunnable{r: r, ctrl: ctrl}, log), nil
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

func (i *informers) get(req reconcile.Request) (*unstructured.Unstructured, error) {
	inf := i.cluster
	if req.Namespace != "" {
		inf = i.namespaced
	}
	obj, err := inf.Get(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	return obj.(*object.Object).Unstructured()
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
	running    map[string]*loaded         // by plugin name
	overBudget map[reconcile.Request]bool // objects refused for memory or units: tried again when one stops
}

// loaded is the plugin an object runs, under its supervisor.
type loaded struct {
	sup       *plugin.Supervisor
	memory    int64  // its instances' share of the memory budget
	code      int64  // its compiled modules' share (codeBudget)
	units     int    // its share of the unit budget: its shards, or 1
	namespace string // a Plugin's, for the namespace's budget
	settings  string // the spec without module and paused: a change starts it anew
	module    string // the module it was started with
	announced bool   // the Loaded event was recorded
	shown     string // the last load failure said, so that it is said once
	lastErr   string // the last refusal or fetch failure of a swap, cleared by a good swap
	lastWhy   string // its reason: SwapRefused, FetchFailed or OverBudget
	swaps     int64
	refusals  int64
	tried     string            // the last module a swap failed to, its retries, and when the
	retries   *backoff.Schedule // next is due: a module refused or out of reach is tried again on
	due       time.Time         // the backoff.ModuleFetch schedule, not on every reconcile
}

// failure is why an object's plugin is not loaded, as its status says it.
type failure struct {
	reason   string // Invalid, FetchFailed, Refused, LoadFailed, OverBudget or StartFailed
	msg      string
	refusals int64 // modules refused, over the object's life
}

// settingsOf is what of spec starts the plugin anew when it changes: all but module and paused.
func settingsOf(u *unstructured.Unstructured) string {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	spec = maps.Clone(spec)
	delete(spec, "module")
	delete(spec, "paused")
	b, _ := json.Marshal(spec)
	return string(b)
}

func (r *resources) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	reads := r.reads.Load()
	if reads == nil {
		return reconcile.Result{}, fmt.Errorf("the plugin objects' informers are not held")
	}
	name := PluginName(req.Namespace, req.Name)
	u, err := reads.get(req)
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
	cfg, paused, err := ConfigOf(u)
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
	settings := settingsOf(u)

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
		l = &loaded{settings: settings, module: cfg.Module, memory: cfg.Memory(), units: cfg.Units(), swaps: swaps, refusals: refusals}
		again := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}}
		cfg.Code = codeBudget{r: r, l: l, name: name, what: describe(u)}
		l.sup = r.host.Supervise(cfg, plugin.SuperviseOptions{
			OnState:   func(plugin.State) { r.ctrl.Enqueue(again) },
			OnSwap:    r.onSwap(u, l),
			OnRollout: r.onRollout(u, l),
			OnRunning: func(bool) { r.ctrl.Enqueue(again) },
			// A kind it needs that the host cannot list makes it Degraded, naming what is missing.
			OnUnavailable: func([]string) { r.ctrl.Enqueue(again) },
			// So does a plugin failing every reconcile, until one succeeds.
			OnFailing: func(string) { r.ctrl.Enqueue(again) },
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
	r.mu.Lock()
	announce := !l.announced
	l.announced, l.shown = true, ""
	r.mu.Unlock()
	if announce {
		r.event(u, corev1.EventTypeNormal, "Loaded", "running %s (%s) as %s", p.ModuleRef(), p.Module().Digest(), cfg.ServiceAccount.User())
	}
	r.rolloutAction(u, p)
	switch module := cfg.Module; {
	case p.ModuleRef() != module:
		r.mu.Lock()
		if l.tried != module {
			l.tried, l.retries, l.due = module, backoff.ModuleFetch.Start(), time.Time{}
		}
		wait := time.Until(l.due)
		r.mu.Unlock()
		if wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, r.status(ctx, u, l, nil)
		}
		if err := p.SwapTo(ctx, module); err != nil {
			var fetch *plugin.FetchError
			r.mu.Lock()
			delay := l.retries.Next()
			l.due = time.Now().Add(delay)
			why := "" // not a refusal of the module, which OnSwap was told
			switch {
			case errors.As(err, &fetch):
				why = plugin.ReasonFetchFailed
			case errors.As(err, new(*wasm.BudgetError)):
				why = plugin.ReasonOverBudget
			}
			news := why != "" && l.lastErr != err.Error()
			if why != "" {
				l.lastErr, l.lastWhy = err.Error(), why
			}
			r.mu.Unlock()
			if news {
				if r.leading() && why == plugin.ReasonFetchFailed {
					r.log.Error(err, "the plugin object's module could not be fetched; the current module keeps serving, and it is tried again with backoff", "plugin", cfg.Name, "serving", p.Module().Digest(), "next", delay.Round(time.Millisecond))
				}
				r.event(u, corev1.EventTypeWarning, why, "%s keeps serving: %v", p.Module().Digest(), err)
			}
			return reconcile.Result{RequeueAfter: delay}, r.status(ctx, u, l, nil)
		}
		r.mu.Lock()
		l.tried, l.lastErr, l.lastWhy = "", "", "" // the move is done: spec.module serves
		r.mu.Unlock()
	default:
		// spec.module is the module serving: a failed move to another one is over.
		r.mu.Lock()
		if l.tried != "" {
			l.tried, l.lastErr, l.lastWhy = "", "", ""
		}
		r.mu.Unlock()
	}
	if ro := p.Rollout(); ro != nil && ro.Active() { // its figures, fresh in status
		return reconcile.Result{RequeueAfter: rolloutStatusEvery}, r.status(ctx, u, l, nil)
	}
	return reconcile.Result{}, r.status(ctx, u, l, nil)
}

// rolloutStatusEvery is how often the status of a plugin rolling out a new version is written.
const rolloutStatusEvery = 2 * time.Second


func quantity(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// notLoaded reports an object whose plugin is not loaded: once per distinct failure in the log
// and an Event, and always in status. The supervisor tries again on its own.
func (r *resources) notLoaded(ctx context.Context, u *unstructured.Unstructured, l *loaded, st plugin.State) error {
	if st.Reason == "" { // the first attempt has not ended
		return r.status(ctx, u, nil, &failure{reason: "Loading", msg: "the module is being loaded", refusals: l.refusals})
	}
	first := st.Err
	var before *plugin.RefusedBeforeError
	if errors.As(first, &before) {
		first = before.Err
	}
	r.mu.Lock()
	news := l.shown != first.Error()
	l.shown = first.Error()
	if news && st.Reason == plugin.ReasonRefused {
		l.refusals++
	}
	f := failure{reason: st.Reason, msg: first.Error(), refusals: l.refusals}
	r.mu.Unlock()
	switch cfg := l.sup.Config(); {
	case st.Reason == plugin.ReasonRevoked:
		f.msg = fmt.Sprintf("%s (looked at again every %s)", f.msg, st.Next.Round(time.Second))
	case st.Next > 0 && isRegistry(&cfg):
		f.msg = fmt.Sprintf("%s (tried again in %s)", f.msg, st.Next.Round(time.Second))
	case st.Next > 0:
		f.msg = fmt.Sprintf("%s (tried again in %s, or as soon as the module file changes)", f.msg, st.Next.Round(time.Second))
	}
	if news {
		r.event(u, corev1.EventTypeWarning, st.Reason, "%v", st.Err)
	}
	return r.status(ctx, u, nil, &f)
}

func isRegistry(cfg *plugin.Config) bool {
	_, ok := cfg.OCIRef()
	return ok
}

// onSwap records a swap's outcome on the object, whoever triggered it.
func (r *resources) onSwap(u *unstructured.Unstructured, l *loaded) func(plugin.SwapEvent) {
	again := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}}
	return func(s plugin.SwapEvent) {
		r.mu.Lock()
		switch {
		case s.Err != nil:
			l.lastErr, l.lastWhy = s.Err.Error(), "SwapRefused"
			l.refusals++
		case s.Unchanged:
			if l.lastWhy == "SwapRefused" {
				l.lastErr, l.lastWhy = "", ""
			}
		default:
			l.lastErr, l.lastWhy = "", ""
			l.swaps++
		}
		r.mu.Unlock()
		switch {
		case s.Unchanged:
		case s.Err != nil:
			r.event(u, corev1.EventTypeWarning, "SwapRefused", "%s keeps serving: %v", s.From, s.Err)
		case s.Rollback:
			r.event(u, corev1.EventTypeNormal, "RolledBack", "%s -> %s, a version that served before (kept compiled)", s.From, s.To)
		default:
			r.event(u, corev1.EventTypeNormal, "Swapped", "%s -> %s", s.From, s.To)
		}
		r.ctrl.Enqueue(again)
	}
}

// RolloutAnnotation on a plugin object is an operator's word on the rollout of a new module
// version: "promote DIGEST" (the candidate serves every key now) or "abort DIGEST" (it is
// dropped, and not tried again until the plugin's source changes). It acts only while the
// rollout of that digest runs, on every replica, and may stay on the object.
const RolloutAnnotation = "wasmrec.dev/rollout"

// rolloutAction acts on u's rollout annotation, if it names p's candidate.
func (r *resources) rolloutAction(u *unstructured.Unstructured, p *plugin.Plugin) {
	word, digest, _ := strings.Cut(u.GetAnnotations()[RolloutAnnotation], " ")
	st := p.Rollout()
	if digest == "" || st == nil || !st.Active() || st.Candidate != strings.TrimSpace(digest) {
		return
	}
	switch word {
	case "promote":
		p.Promote()
	case "abort":
		p.Abort(fmt.Sprintf("aborted by an operator (annotation %s) at the %s step", RolloutAnnotation, st.Step))
	default:
		r.event(u, corev1.EventTypeWarning, "BadRolloutAnnotation", "annotation %s: %q: write \"promote %s\" or \"abort %s\"", RolloutAnnotation, word, st.Candidate, st.Candidate)
	}
}

// onRollout records a rollout's news on the object as Events, and has its status written.
// A version rolled back or aborted makes the object Degraded, as a refused swap does, until a
// version is taken.
func (r *resources) onRollout(u *unstructured.Unstructured, l *loaded) func(plugin.RolloutEvent) {
	again := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}}
	return func(e plugin.RolloutEvent) {
		st := e.Status
		typ, msg := corev1.EventTypeNormal, ""
		switch e.Reason {
		case "RolloutStarted":
			msg = fmt.Sprintf("%s comes in beside %s: %s step", st.Candidate, st.Live, st.Step)
		case "RolloutStep":
			msg = fmt.Sprintf("%s: %s; now the %s step", st.Candidate, st.Message, st.Step)
		case "RolloutRolledBack":
			typ = corev1.EventTypeWarning
			msg = fmt.Sprintf("%s rolled back at the %s step, %s serving on: %s", st.Candidate, st.Step, st.Live, st.Message)
		default: // promoted, aborted
			msg = fmt.Sprintf("%s: %s", st.Candidate, st.Message)
		}
		if e.Dropped { // spec.module's version does not serve: Degraded until one is taken
			r.mu.Lock()
			l.lastErr, l.lastWhy = fmt.Sprintf("%s (%s) does not serve: %s; %s serves", st.Candidate, strings.ToLower(st.Stage), st.Message, st.Live), st.Stage
			r.mu.Unlock()
		}
		r.event(u, typ, e.Reason, "%s", msg)
		r.ctrl.Enqueue(again)
	}
}

func (r *resources) refuse(ctx context.Context, u *unstructured.Unstructured, reason string, err error) error {
	if r.leading() { // once, by the replica that reports
		r.log.Error(err, "plugin object refused", "object", describe(u), "reason", reason)
	}
	r.event(u, corev1.EventTypeWarning, reason, "%v", err)
	return r.status(ctx, u, nil, &failure{reason: reason, msg: err.Error()})
}

// leading is whether this replica leads: only the leader writes status and Events, so that
// replicas loading the same plugins do not report everything twice.
//
// Replicas that share plugins (Host.Share) all run: one of them, the group's reporter, writes
// the status and Events they would all write alike, and each writes its own entry of
// status.replicas.
func (r *resources) leading() bool {
	if t := r.host.Share(); t != nil {
		return t.Reporter()
	}
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

func (r *resources) event(u *unstructured.Unstructured, typ, reason, format string, args ...any) {
	if r.leading() {
		r.recorder.Eventf(u, typ, reason, format, args...)
	}
}

// status writes the object's status: Ready while a module serves, Degraded while the last
// attempt (load or swap) failed, with its message, and Running while the controller runs. The
// conditions are metav1.Conditions, set with apimachinery's helpers: a condition's
// lastTransitionTime moves only when its status does. A failed write is returned, so that the
// reconcile is retried with backoff.
func (r *resources) status(ctx context.Context, u *unstructured.Unstructured, l *loaded, f *failure) error {
	var s *serving
	if l != nil {
		p := l.sup.State().Plugin
		if p == nil {
			return nil // stopped meanwhile: the next reconcile says so
		}
		r.mu.Lock()
		s = &serving{swaps: l.swaps, refusals: l.refusals, lastErr: l.lastErr, lastWhy: l.lastWhy}
		r.mu.Unlock()
		s.digest, s.running, s.kinds, s.plugin, s.unavailable = p.Module().Digest(), p.Running(), p.Kinds(), p, p.Unavailable()
		s.failing, s.waiting = p.Failing(), p.Waiting()
		s.rollout = p.Rollout()
	}
	st := map[string]any{}
	if r.leading() {
		st = statusOf(u, s, f, r.host.Share() != nil)
	}
	if t := r.host.Share(); t != nil {
		st["replicas"] = replicasOf(u, t.Identity(), t.Replicas(), s)
	}
	if len(st) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"status": st})
	gvr := ClusterGVR
	if u.GetNamespace() != "" {
		gvr = GVR
	}
	_, err := r.dynamic.Resource(gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing %s's status: %w", describe(u), err)
	}
	return nil
}

// serving is what a Plugin's status says of its loaded plugin.
type serving struct {
	digest          string
	swaps, refusals int64
	lastErr         string // the last swap's refusal, or fetch failure; "" once one succeeds
	lastWhy         string // its reason: SwapRefused, FetchFailed or OverBudget
	running         bool
	kinds           []schema.GroupVersionKind
	plugin          *plugin.Plugin
	unavailable     []string // what it needs that the host cannot list or watch
	failing         string   // Plugin.Failing: every reconcile fails
	waiting         []string // Plugin.Waiting: kinds it needs that no API serves
	rollout         *plugin.RolloutStatus
}

// statusOf is the status (a merge patch) of Plugin u, whose plugin s serves (nil: not loaded,
// for f).
// With shared set, replicas share the plugin: whether it runs is said per replica.
func statusOf(u *unstructured.Unstructured, s *serving, f *failure, shared bool) map[string]any {
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &conds) // conditions the host did not write are replaced
	}
	set := func(typ string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: u.GetGeneration()})
	}
	st := map[string]any{"observedGeneration": u.GetGeneration()}
	lastErr, why := "", "LoadFailed"
	if f != nil {
		lastErr, why = f.msg, f.reason
		if f.refusals > 0 {
			st["refusals"] = f.refusals
		}
	}
	if s != nil {
		lastErr, why = s.lastErr, cmp.Or(s.lastWhy, "SwapRefused")
		st["swaps"], st["refusals"], st["activeDigest"] = s.swaps, s.refusals, s.digest
		st["rollout"] = rolloutOf(s.rollout)
	}
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	switch {
	case paused:
		set("Ready", false, "Paused", "spec.paused is set")
	case s == nil:
		set("Ready", false, "NotLoaded", lastErr)
	case len(s.waiting) > 0:
		// Its controller cannot start, whichever replica leads: no CRD serves a kind it needs.
		set("Ready", false, "WaitingForKinds", "waiting until these are served: "+strings.Join(s.waiting, "; "))
	case lastErr != "":
		set("Ready", true, "Serving", "the last good module serves")
	default:
		set("Ready", true, "Serving", "the module serves")
	}
	switch {
	case paused:
		set("Degraded", false, "Paused", "")
	case s == nil || lastErr != "":
		set("Degraded", true, why, lastErr)
	case len(s.unavailable) > 0:
		set("Degraded", true, "Unavailable", strings.Join(s.unavailable, "; "))
	case s.failing != "":
		set("Degraded", true, "ReconcilesFailing", s.failing)
	default:
		set("Degraded", false, "Healthy", "")
	}
	switch {
	case s == nil || shared:
		meta.RemoveStatusCondition(&conds, "Running")
	case s.running:
		set("Running", true, "Reconciling", "the controller runs")
	default:
		set("Running", false, "Waiting", fmt.Sprintf("not running: it waits for %s to be served (their CRDs installed) and for this replica to lead", kinds.GVKs(s.kinds)))
	}
	st["conditions"] = conds
	st["lastError"] = nil // a merge patch: null removes it
	if lastErr != "" {
		st["lastError"] = lastErr
	}
	return st
}

// rolloutOf is the merge patch of status.rollout: ro whole, the fields it leaves out null.
func rolloutOf(ro *plugin.RolloutStatus) any {
	if ro == nil {
		return nil
	}
	b, _ := json.Marshal(ro)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"ended", "differences"} {
		if _, ok := m[k]; !ok {
			m[k] = nil
		}
	}
	return m
}

// replicasOf is the merge patch of status.replicas from replica me: its own entry (what it
// holds of the plugin and whether it runs it), and null for the entries of replicas no longer
// live, which are gone for good (a restarted process is a new replica).
func replicasOf(u *unstructured.Unstructured, me string, live []string, s *serving) map[string]any {
	out := map[string]any{}
	old, _, _ := unstructured.NestedMap(u.Object, "status", "replicas")
	for id := range old {
		if !slices.Contains(live, id) {
			out[id] = nil
		}
	}
	entry := map[string]any{"holds": []string{}, "running": false}
	if s != nil {
		if held := s.plugin.Held(); held != nil {
			entry["holds"] = held
		}
		entry["running"] = s.running
	}
	out[me] = entry
	return out
}

// unload stops an object's plugin: its supervisor removes it from the manager and closes it.
func (r *resources) unload(ctx context.Context, name string, u *unstructured.Unstructured) {
	r.mu.Lock()
	l := r.running[name]
	delete(r.running, name)
	waiting := slices.Collect(maps.Keys(r.overBudget))
	r.mu.Unlock()
	if l == nil {
		return
	}
	defer func() { // its memory is free: the objects refused for lack of it try again
		for _, req := range waiting {
			r.ctrl.Enqueue(req)
		}
	}()
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
