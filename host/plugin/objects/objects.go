// Package objects runs the plugins that Plugin objects (plugins.wasmrec.dev) describe: a
// controller of controllers, built on package plugin's public API alone.
package objects

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
	// A follower that becomes the leader writes every Plugin's status: it wrote none so far.
	// (Objects reconciled after the election write it anyway; this covers the ones before.)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-done:
			return
		case <-rr.r.mgr.Elected():
		}
		objs, _ := inf.List("", nil)
		for _, o := range objs {
			rr.ctrl.Enqueue(reconcile.Request{NamespacedName: types.NamespacedName{Name: o.(metav1.Object).GetName()}})
		}
	})
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
}

// loaded is a plugin a Plugin object runs.
type loaded struct {
	p         *plugin.Plugin
	runnables []manager.Runnable
	settings  string // the spec without the module: a change reloads
	lastErr   string // the last refusal, cleared by a good swap
	swaps     int64
	refusals  int64
	tried     string            // the last module a swap failed to, its retries, and when the
	retries   *backoff.Schedule // next is due: a module refused or out of reach is tried again on
	due       time.Time         // the backoff.ModuleFetch schedule, not on every reconcile
}

// failing is a Plugin object whose plugin could not be loaded: the settings and module tried,
// the last error said, and the retry schedule.
type failing struct {
	tried   string
	lastErr string
	retries *backoff.Schedule
}

func (r *resources) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	inf := r.reads.Load()
	if inf == nil {
		return reconcile.Result{}, fmt.Errorf("the Plugin informer is not held")
	}
	obj, err := inf.Get("", req.Name)
	if apierrors.IsNotFound(err) {
		r.mu.Lock()
		delete(r.failing, req.Name)
		r.mu.Unlock()
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
		return reconcile.Result{}, r.status(ctx, u, nil, err.Error())
	}
	if paused {
		r.unload(ctx, cfg.Name, u)
		return reconcile.Result{}, r.status(ctx, u, nil, "")
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
			// A registry may come back, a file may change: try again on the ModuleFetch schedule.
			// A module refused before is not compiled again (LoadFile says so) and not reported
			// again; neither is an error said already.
			r.mu.Lock()
			f := r.failing[cfg.Name]
			if f == nil || f.tried != string(settings)+module {
				f = &failing{tried: string(settings) + module, retries: backoff.ModuleFetch.Start()}
				r.failing[cfg.Name] = f
			}
			again := errors.As(err, new(*plugin.RefusedBeforeError)) || f.lastErr == err.Error()
			f.lastErr = err.Error()
			delay := f.retries.Next()
			r.mu.Unlock()
			if again {
				return reconcile.Result{RequeueAfter: delay}, r.status(ctx, u, nil, err.Error())
			}
			return reconcile.Result{RequeueAfter: delay}, r.refuse(ctx, u, "LoadFailed", err)
		}
		r.mu.Lock()
		delete(r.failing, cfg.Name)
		r.mu.Unlock()
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
			return reconcile.Result{RequeueAfter: wait}, r.status(ctx, u, l, "")
		}
		if err := l.p.SwapTo(ctx, module); err != nil {
			var fetch *plugin.FetchError
			r.mu.Lock()
			delay := l.retries.Next()
			l.due = time.Now().Add(delay)
			news := false
			if errors.As(err, &fetch) { // not a refusal of the module: OnSwap was not told
				news = l.lastErr != err.Error()
				l.lastErr = err.Error()
			}
			r.mu.Unlock()
			if news {
				r.event(u, corev1.EventTypeWarning, "FetchFailed", "%s keeps serving: %v", l.p.Module().Digest(), err)
			}
			return reconcile.Result{RequeueAfter: delay}, r.status(ctx, u, l, "")
		}
	}
	return reconcile.Result{}, r.status(ctx, u, l, "")
}

// onSwap records a swap's outcome on the Plugin object, whoever triggered it.
func (r *resources) onSwap(u *unstructured.Unstructured, l *loaded) func(plugin.SwapEvent) {
	return func(s plugin.SwapEvent) {
		r.mu.Lock()
		if s.Err != nil {
			l.lastErr = s.Err.Error()
			l.refusals++
		} else {
			l.lastErr = ""
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
	return r.status(ctx, u, nil, err.Error())
}

// leading is whether this replica leads: only the leader writes status and Events, so that
// replicas loading the same plugins do not report everything twice.
func (r *resources) leading() bool {
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
func (r *resources) status(ctx context.Context, u *unstructured.Unstructured, l *loaded, loadErr string) error {
	if !r.leading() {
		return nil
	}
	var s *serving
	if l != nil {
		r.mu.Lock()
		s = &serving{swaps: l.swaps, refusals: l.refusals, lastErr: l.lastErr}
		r.mu.Unlock()
		s.digest, s.running, s.kinds = l.p.Module().Digest(), l.p.Running(), l.p.Kinds()
	}
	patch, _ := json.Marshal(map[string]any{"status": statusOf(u, s, loadErr)})
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
	running         bool
	kinds           []schema.GroupVersionKind
}

// statusOf is the status (a merge patch) of Plugin u, whose plugin s serves (nil: not loaded,
// for loadErr).
func statusOf(u *unstructured.Unstructured, s *serving, loadErr string) map[string]any {
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
	lastErr := loadErr
	if s != nil {
		lastErr = s.lastErr
		st["swaps"], st["refusals"], st["activeDigest"] = s.swaps, s.refusals, s.digest
	}
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	switch {
	case paused:
		set("Ready", false, "Paused", "spec.paused is set")
		set("Degraded", false, "Paused", "")
	case s == nil:
		set("Ready", false, "NotLoaded", lastErr)
		set("Degraded", true, "LoadFailed", lastErr)
	case lastErr != "":
		set("Ready", true, "Serving", "the last good module serves")
		set("Degraded", true, "SwapRefused", lastErr)
	default:
		set("Ready", true, "Serving", "the module serves")
		set("Degraded", false, "Healthy", "")
	}
	switch {
	case s == nil:
		meta.RemoveStatusCondition(&conds, "Running")
	case s.running:
		set("Running", true, "Reconciling", "the controller runs")
	default:
		set("Running", false, "Waiting", fmt.Sprintf("waiting until %v are served (their CRDs installed) and this replica leads", s.kinds))
	}
	st["conditions"] = conds
	st["lastError"] = nil // a merge patch: null removes it
	if lastErr != "" {
		st["lastError"] = lastErr
	}
	return st
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
