// Package objects runs the plugins that Plugin objects (plugins.wasmrec.dev) describe: a
// controller of controllers, built on package plugin's public API alone.
package objects

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
	"github.com/wasmrec/wasmrec/internal/backoff"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// CRD is the CustomResourceDefinition of Plugin (plugins.wasmrec.dev, v1alpha1).
//
//go:embed plugins.crd.yaml
var CRD []byte

// GVK is the Plugin kind.
var GVK = schema.GroupVersionKind{Group: "wasmrec.dev", Version: "v1alpha1", Kind: "Plugin"}

// GVR is the Plugin resource.
var GVR = GVK.GroupVersion().WithResource("plugins")

// ConfigOf returns the settings a Plugin object gives its plugin, and whether it is paused.
func ConfigOf(u *unstructured.Unstructured) (cfg plugin.Config, paused bool, err error) {
	var spec pluginSpec
	raw, _ := json.Marshal(u.Object["spec"])
	if err := json.Unmarshal(raw, &spec); err != nil {
		return plugin.Config{}, false, fmt.Errorf("spec is not a plugin's settings: %v: fix the Plugin object", err)
	}
	cfg = spec.Config
	cfg.Name = u.GetName()
	cfg.Origin = fmt.Sprintf("Plugin object %q", cfg.Name)
	return cfg, spec.Paused, nil
}

// pluginSpec is a Plugin's spec: a Config without its name, and paused.
type pluginSpec struct {
	plugin.Config      // its fields are the spec's; name comes from the object
	Paused        bool `json:"paused,omitempty"`
}

// New returns the controller that runs the plugins Plugin objects describe, in h. It loads a
// plugin when its object appears, swaps its module when spec.module changes, reloads it when
// another setting changes, stops it when paused or deleted, and reports in the object's status
// (Ready, Degraded, Running, activeDigest) and in Events on it. Add it to h's manager; it waits
// while the Plugin CRD is not installed.
//
// It runs on every replica, so that a follower loads the same plugins and keeps their informers
// warm; their controllers run on the leader only, and only the leader writes status and Events.
func New(h *plugin.Host, log logr.Logger) (manager.Runnable, error) {
	mgr := h.Manager()
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	r := &resources{host: h, mgr: mgr, dynamic: dyn, log: log, running: map[string]*loaded{}, failing: map[string]*failing{},
		recorder: h.Recorder("wasmrec")}
	key := cache.Key{GroupVersionKind: GVK}
	// Several workers: a load compiles, and one slow plugin must not hold the others back.
	ctrl, err := controller.New("plugins", r, controller.Options{Logger: log, MaxConcurrentReconciles: 4})
	if err != nil {
		return nil, err
	}
	// Status writes do not change the generation; spec changes and deletions pass.
	if err := ctrl.Watch(source.Kind(mgr.GetCache(), key, handler.EnqueueRequestForObject(), predicate.GenerationChanged())); err != nil {
		return nil, err
	}
	r.ctrl = ctrl
	return crdwatch.Follow(h.CRDs(), []schema.GroupVersionKind{GVK}, &resourcesRunnable{r: r, ctrl: ctrl}, log), nil
}

// resourcesRunnable runs the Plugin controller and unloads every plugin when it stops (the CRD
// went away, or the host stops).
type resourcesRunnable struct {
	r    *resources
	ctrl *controller.Controller
}

func (rr *resourcesRunnable) Name() string { return "plugins" }

// NeedLeaderElection is false: every replica loads the plugins (see New).
func (rr *resourcesRunnable) NeedLeaderElection() bool { return false }

func (rr *resourcesRunnable) Start(ctx context.Context) error {
	inf, err := rr.r.mgr.GetCache().Acquire(cache.Key{GroupVersionKind: GVK})
	if err != nil {
		return err
	}
	rr.r.reads.Store(inf)
	rr.r.runCtx = ctx
	// A follower that becomes the leader writes every Plugin's status: it wrote none so far.
	// (Objects reconciled after the election write it anyway; this covers the ones before.)
	done := make(chan struct{})
	var wg sync.WaitGroup
	all := func() {
		objs, _ := inf.List("", nil)
		for _, o := range objs {
			rr.ctrl.Enqueue(reconcile.Request{NamespacedName: types.NamespacedName{Name: o.(metav1.Object).GetName()}})
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
	if t := rr.r.host.Share; t != nil {
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
	rr.r.reads.Store(nil)
	inf.Release()
	return err
}

type resources struct {
	host     *plugin.Host
	mgr      *manager.Manager
	dynamic  dynamic.Interface // status writes
	log      logr.Logger
	ctrl     *controller.Controller
	recorder record.EventRecorder
	reads    atomic.Pointer[cache.Informer] // the Plugin informer, held while the controller runs

	mu      sync.Mutex
	running map[string]*loaded
	failing map[string]*failing // Plugin objects whose plugin did not load, by name
	runCtx  context.Context     // the controller's run: retries wait within it
}

// loaded is a plugin a Plugin object runs.
type loaded struct {
	p         *plugin.Plugin
	runnables []manager.Runnable
	settings  string // the spec without the module: a change reloads
	lastErr   string // the last refusal or fetch failure, cleared by a good swap
	lastWhy   string // its reason: SwapRefused or FetchFailed
	swaps     int64
	refusals  int64
	tried     string            // the last module a swap failed to, its retries, and when the
	retries   *backoff.Schedule // next is due: a module refused or out of reach is tried again on
	due       time.Time         // the backoff.ModuleFetch schedule, not on every reconcile
}

// failing is a Plugin object whose plugin could not be loaded: the settings and module tried,
// the last failure said, the retry schedule, and the wait for the next try.
type failing struct {
	tried   string
	last    failure
	retries *backoff.Schedule
	stop    context.CancelFunc // ends the wait for the next try
}

// failure is why a Plugin's plugin is not loaded, as its status says it.
type failure struct {
	reason   string // Invalid, FetchFailed, Refused or LoadFailed
	msg      string
	refusals int64 // modules refused, over the object's life
}

func (r *resources) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	inf := r.reads.Load()
	if inf == nil {
		return reconcile.Result{}, fmt.Errorf("the Plugin informer is not held")
	}
	obj, err := inf.Get("", req.Name)
	if apierrors.IsNotFound(err) {
		r.forgetFailure(req.Name)
		r.unload(ctx, req.Name, nil)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	u, err := obj.(*object.Object).Unstructured()
	if err != nil {
		return reconcile.Result{}, err
	}
	cfg, paused, err := ConfigOf(u)
	if err != nil {
		return reconcile.Result{}, r.status(ctx, u, nil, &failure{reason: "Invalid", msg: err.Error()})
	}
	if paused {
		r.forgetFailure(cfg.Name)
		r.unload(ctx, cfg.Name, u)
		return reconcile.Result{}, r.status(ctx, u, nil, nil)
	}
	module := cfg.Module
	cfg.Module = ""
	settings, _ := json.Marshal(cfg)
	cfg.Module = module

	r.mu.Lock()
	l := r.running[cfg.Name]
	r.mu.Unlock()
	if l != nil && l.settings != string(settings) {
		r.unload(ctx, cfg.Name, u) // other settings: reload
		l = nil
	}
	switch {
	case l == nil:
		if err := cfg.Validate(); err != nil {
			return reconcile.Result{}, r.refuse(ctx, u, "Invalid", err)
		}
		p, err := r.host.LoadFile(ctx, cfg)
		if err != nil {
			return reconcile.Result{}, r.loadFailed(ctx, u, cfg, string(settings), err)
		}
		r.forgetFailure(cfg.Name)
		// The counts are the object's: a reload, a restart or a new leader carries them on.
		swaps, _, _ := unstructured.NestedInt64(u.Object, "status", "swaps")
		refusals, _, _ := unstructured.NestedInt64(u.Object, "status", "refusals")
		l = &loaded{p: p, settings: string(settings), swaps: swaps, refusals: refusals}
		p.OnSwap = r.onSwap(u, l)
		p.OnRunning = func(bool) { r.ctrl.Enqueue(reconcile.Request{NamespacedName: types.NamespacedName{Name: u.GetName()}}) }
		if l.runnables, err = r.host.Run(p); err == nil {
			// spec.module may move between files and registries: the triggers follow it.
			for _, w := range p.Triggers() {
				if err = r.mgr.Add(w); err != nil {
					break
				}
				l.runnables = append(l.runnables, w)
			}
		}
		r.mu.Lock()
		r.running[cfg.Name] = l
		r.mu.Unlock()
		if err != nil {
			r.unload(ctx, cfg.Name, u)
			return reconcile.Result{}, r.refuse(ctx, u, "StartFailed", err)
		}
		r.event(u, corev1.EventTypeNormal, "Loaded", "running %s (%s)", module, p.Module().Digest())
	case l.p.ModuleRef() != module:
		r.mu.Lock()
		if l.tried != module {
			l.tried, l.retries, l.due = module, backoff.ModuleFetch.Start(), time.Time{}
		}
		wait := time.Until(l.due)
		r.mu.Unlock()
		if wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, r.status(ctx, u, l, nil)
		}
		if err := l.p.SwapTo(ctx, module); err != nil {
			var fetch *plugin.FetchError
			r.mu.Lock()
			delay := l.retries.Next()
			l.due = time.Now().Add(delay)
			news := false
			if errors.As(err, &fetch) { // not a refusal of the module: OnSwap was not told
				news = l.lastErr != err.Error()
				l.lastErr, l.lastWhy = err.Error(), "FetchFailed"
			}
			r.mu.Unlock()
			if news {
				if r.leading() {
					r.log.Error(err, "the Plugin's module could not be fetched; the current module keeps serving, and it is tried again with backoff", "plugin", cfg.Name, "serving", l.p.Module().Digest(), "next", delay.Round(time.Millisecond))
				}
				r.event(u, corev1.EventTypeWarning, "FetchFailed", "%s keeps serving: %v", l.p.Module().Digest(), err)
			}
			return reconcile.Result{RequeueAfter: delay}, r.status(ctx, u, l, nil)
		}
		r.mu.Lock()
		l.tried = "" // the move is done: nothing pending
		r.mu.Unlock()
	default:
		// spec.module is the module serving: a failed move to another one is over.
		r.mu.Lock()
		if l.tried != "" {
			l.tried, l.lastErr, l.lastWhy = "", "", ""
		}
		r.mu.Unlock()
	}
	return reconcile.Result{}, r.status(ctx, u, l, nil)
}

// loadFailed says why a Plugin's plugin did not load, once per distinct reason, and has it tried
// again on the backoff.ModuleFetch schedule, or as soon as its module file changes. A module
// refused for what it is is not compiled again (LoadFile says it was refused before) until it
// or the settings change.
func (r *resources) loadFailed(ctx context.Context, u *unstructured.Unstructured, cfg plugin.Config, settings string, err error) error {
	var (
		fetch  *plugin.FetchError
		before *plugin.RefusedBeforeError
	)
	reason, first := "LoadFailed", err // first: the error as it was first said
	switch {
	case errors.As(err, &fetch):
		reason = "FetchFailed"
	case errors.As(err, &before):
		reason, first = "Refused", before.Err
	case errors.As(err, new(*plugin.RefusedError)):
		reason = "Refused"
	}
	r.mu.Lock()
	f := r.failing[cfg.Name]
	if f == nil || f.tried != settings+cfg.Module {
		if f != nil && f.stop != nil {
			f.stop()
		}
		refusals, _, _ := unstructured.NestedInt64(u.Object, "status", "refusals")
		f = &failing{tried: settings + cfg.Module, retries: backoff.ModuleFetch.Start(), last: failure{refusals: refusals}}
		r.failing[cfg.Name] = f
	}
	news := f.last.msg != first.Error()
	if news && reason == "Refused" {
		f.last.refusals++
	}
	f.last.reason, f.last.msg = reason, first.Error()
	delay := f.retries.Next()
	// Tried again after the delay, or at once when the module file changes.
	if f.stop != nil {
		f.stop()
	}
	wait, stop := context.WithCancel(r.runCtx)
	f.stop = stop
	last := f.last
	r.mu.Unlock()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: u.GetName()}}
	go func() {
		if r.host.WaitForModule(wait, cfg.Module, delay) {
			r.ctrl.Enqueue(req)
		}
	}()
	shown := last
	shown.msg = fmt.Sprintf("%s (tried again in %s, or as soon as the module file changes)", err.Error(), delay.Round(time.Second))
	if _, fromRegistry := cfg.OCIRef(); fromRegistry {
		shown.msg = fmt.Sprintf("%s (tried again in %s)", err.Error(), delay.Round(time.Second))
	}
	if !news {
		return r.status(ctx, u, nil, &shown)
	}
	if r.leading() {
		r.log.Error(err, "Plugin object's plugin not loaded; tried again with backoff", "plugin", cfg.Name, "reason", reason, "next", delay.Round(time.Millisecond))
	}
	r.event(u, corev1.EventTypeWarning, reason, "%v", err)
	return r.status(ctx, u, nil, &shown)
}

// forgetFailure drops what is remembered of a Plugin's failed loads.
func (r *resources) forgetFailure(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.failing[name]; f != nil && f.stop != nil {
		f.stop()
	}
	delete(r.failing, name)
}

// onSwap records a swap's outcome on the Plugin object, whoever triggered it.
func (r *resources) onSwap(u *unstructured.Unstructured, l *loaded) func(plugin.SwapEvent) {
	return func(s plugin.SwapEvent) {
		r.mu.Lock()
		if s.Err != nil {
			l.lastErr, l.lastWhy = s.Err.Error(), "SwapRefused"
			l.refusals++
		} else {
			l.lastErr, l.lastWhy = "", ""
			l.swaps++
		}
		r.mu.Unlock()
		switch {
		case s.Err != nil:
			r.event(u, corev1.EventTypeWarning, "SwapRefused", "%s keeps serving: %v", s.From, s.Err)
		case s.Rollback:
			r.event(u, corev1.EventTypeNormal, "RolledBack", "%s -> %s, a version that served before (kept compiled)", s.From, s.To)
		default:
			r.event(u, corev1.EventTypeNormal, "Swapped", "%s -> %s", s.From, s.To)
		}
		r.ctrl.Enqueue(reconcile.Request{NamespacedName: types.NamespacedName{Name: u.GetName()}})
	}
}

func (r *resources) refuse(ctx context.Context, u *unstructured.Unstructured, reason string, err error) error {
	if r.leading() { // once, by the replica that reports
		r.log.Error(err, "Plugin object refused", "plugin", u.GetName(), "reason", reason)
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
	if t := r.host.Share; t != nil {
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

// status writes the Plugin's status: Ready while a module serves, Degraded while the last
// attempt (load or swap) failed, with its message, and Running while the controller runs. The
// conditions are metav1.Conditions, set with apimachinery's helpers: a condition's
// lastTransitionTime moves only when its status does. A failed write is returned, so that the
// reconcile is retried with backoff.
func (r *resources) status(ctx context.Context, u *unstructured.Unstructured, l *loaded, f *failure) error {
	var s *serving
	if l != nil {
		r.mu.Lock()
		s = &serving{swaps: l.swaps, refusals: l.refusals, lastErr: l.lastErr, lastWhy: l.lastWhy}
		r.mu.Unlock()
		s.digest, s.running, s.kinds = l.p.Module().Digest(), l.p.Running(), l.p.Kinds()
	}
	st := map[string]any{}
	if r.leading() {
		st = statusOf(u, s, f, r.host.Share != nil)
	}
	if t := r.host.Share; t != nil {
		st["replicas"] = replicasOf(u, t.Identity(), t.Replicas(), l)
	}
	if len(st) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"status": st})
	_, err := r.dynamic.Resource(GVR).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing Plugin %q's status: %w", u.GetName(), err)
	}
	return nil
}

// serving is what a Plugin's status says of its loaded plugin.
type serving struct {
	digest          string
	swaps, refusals int64
	lastErr         string // the last swap's refusal, or fetch failure; "" once one succeeds
	lastWhy         string // its reason: SwapRefused or FetchFailed
	running         bool
	kinds           []schema.GroupVersionKind
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
	}
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	switch {
	case paused:
		set("Ready", false, "Paused", "spec.paused is set")
		set("Degraded", false, "Paused", "")
	case s == nil:
		set("Ready", false, "NotLoaded", lastErr)
		set("Degraded", true, why, lastErr)
	case lastErr != "":
		set("Ready", true, "Serving", "the last good module serves")
		set("Degraded", true, why, lastErr)
	default:
		set("Ready", true, "Serving", "the module serves")
		set("Degraded", false, "Healthy", "")
	}
	switch {
	case s == nil || shared:
		meta.RemoveStatusCondition(&conds, "Running")
	case s.running:
		set("Running", true, "Reconciling", "the controller runs")
	default:
		set("Running", false, "Waiting", fmt.Sprintf("waiting until %s are served (their CRDs installed) and this replica leads", kinds.GVKs(s.kinds)))
	}
	st["conditions"] = conds
	st["lastError"] = nil // a merge patch: null removes it
	if lastErr != "" {
		st["lastError"] = lastErr
	}
	return st
}

// replicasOf is the merge patch of status.replicas from replica me: its own entry (what it
// holds of the plugin and whether it runs it), and null for the entries of replicas no longer
// live, which are gone for good (a restarted process is a new replica).
func replicasOf(u *unstructured.Unstructured, me string, live []string, l *loaded) map[string]any {
	out := map[string]any{}
	old, _, _ := unstructured.NestedMap(u.Object, "status", "replicas")
	for id := range old {
		if !slices.Contains(live, id) {
			out[id] = nil
		}
	}
	entry := map[string]any{"holds": []string{}, "running": false}
	if l != nil {
		if held := l.p.Held(); held != nil {
			entry["holds"] = held
		}
		entry["running"] = l.p.Running()
	}
	out[me] = entry
	return out
}

// unload stops a plugin, removes it from the manager and closes its module.
func (r *resources) unload(ctx context.Context, name string, u *unstructured.Unstructured) {
	r.mu.Lock()
	l := r.running[name]
	delete(r.running, name)
	r.mu.Unlock()
	if l == nil {
		return
	}
	// A guest that loops without being interruptible holds its reconcile: stop waiting for it
	// after its timeout (and a little more) and say so.
	cfg := l.p.Config()
	ctx, cancel := context.WithTimeout(ctx, cfg.ReconcileTimeout()+5*time.Second)
	defer cancel()
	for i := len(l.runnables) - 1; i >= 0; i-- {
		if err := r.mgr.Remove(ctx, l.runnables[i]); err != nil {
			r.log.Error(err, "stopping a plugin", "plugin", name)
		}
	}
	if err := l.p.Close(ctx); err != nil {
		r.log.Error(err, "closing a plugin's module", "plugin", name)
	}
	r.log.Info("plugin unloaded", "plugin", name)
	if u != nil {
		r.event(u, corev1.EventTypeNormal, "Unloaded", "stopped %s", l.p.Module().Digest())
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
