package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin/internal/hostcalls"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/plugin/internal/watches"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// watches is what of the plugin its sources depend on, with the shards it runs now.
func (p *Plugin) watches() watches.Plugin {
	return watches.Plugin{
		Informers:   p.infs.For(informers.Watch),
		Mapper:      p.host.mapper,
		Namespaces:  p.cfg.Namespaces,
		For:         p.forGVK,
		Sharding:    p.sharding(),
		ShardFilter: p.shardFilter,
		Map:         p.mapFunc,
	}
}

// sourcesFor builds the sources a manifest asks for (see watches.Plugin.Sources).
func (p *Plugin) sourcesFor(m *abi.Manifest) (watches.Sources, error) {
	return p.watches().Sources(m)
}

// keysFor are the informers the plugin watches gvk through, with the shards it runs now.
func (p *Plugin) keysFor(gvk schema.GroupVersionKind, metadataOnly bool) []cache.Key {
	return p.watches().Keys(gvk, metadataOnly)
}

// keysWithSharding are keysFor with the shards sh.
func (p *Plugin) keysWithSharding(gvk schema.GroupVersionKind, metadataOnly bool, sh informers.Sharding) []cache.Key {
	w := p.watches()
	w.Sharding = sh
	return w.Keys(gvk, metadataOnly)
}

// mapFunc maps an object of watch w to For requests, as the watch's map mode says.
func (p *Plugin) mapFunc(w abi.Watch) handler.MapFunc {
	switch w.Map {
	case abi.MapSameName:
		return func(_ context.Context, o event.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
		}
	case abi.MapFunc:
		return func(ctx context.Context, o event.Object) []reconcile.Request { return p.mapInGuest(ctx, w, o) }
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

// mapInGuest maps o, an object of watch w, by the plugin's map export: on the live version,
// or, while a rollout's candidate alone watches w's kind so, on the candidate. A swap that adds
// the watch enqueues every For object once it is live, so an event no version maps yet is not
// lost. The guest may get and list, as its reconciles do, but not write, and has the plugin's
// reconcile timeout; a version of an object whose map timed out is not mapped again by the
// same module (the old object of an update, a resync). A request the For kind's scope or the
// plugin's namespaces rule out is dropped, saying so. A failure maps the object to nothing (a
// map function cannot fail in controller-runtime either): it is logged within the plugin's log
// limit and counted, and a streak of them makes the plugin Failing. A map that found no CPU slot
// of its share free before its deadline (another guest of the share held them all) did not run:
// it is tried again later, and what it returns then is enqueued (retryMap), so that a neighbour's
// loop does not lose the plugin an event.
func (p *Plugin) mapInGuest(ctx context.Context, w abi.Watch, o event.Object) []reconcile.Request {
	return p.mapInGuestTry(ctx, w, o, 0)
}

// mapInGuestTry is mapInGuest's try number try (from 0).
func (p *Plugin) mapInGuestTry(ctx context.Context, w abi.Watch, o event.Object, try int) []reconcile.Request {
	raw, err := rawObject(o)
	if err != nil {
		p.log.Error(err, "mapping an event: the object cannot be encoded", "kind", w.Kind, "object", objectKey(o))
		return nil
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ReconcileTimeout())
	defer cancel()
	for range 2 { // a second time if the version picked was closed by a swap meanwhile
		v, index := p.mapperOf(w)
		if v == nil {
			p.log.V(1).Info("not mapping an event: no version of the plugin maps its kind", "kind", w.Kind, "object", objectKey(o))
			return nil
		}
		log := p.log.WithValues("watch", w.APIVersion+" "+w.Kind, "object", objectKey(o), "digest", v.mod.ShortDigest())
		version := timedOutMap{digest: v.mod.Digest(), uid: o.GetUID(), resourceVersion: o.GetResourceVersion()}
		if p.mapTimeouts.has(version) {
			p.countMap("skipped")
			log.V(1).Info("not mapping the object: its map timed out before, at this resourceVersion")
			return nil
		}
		key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}
		calls := &hostcalls.Calls{API: p.api, Policy: v.policy, Index: v.index, Req: key, ReadOnly: true}
		got, err := v.mod.Map(ctx, &wasm.Call{Host: calls, Logger: log, Map: &recording.MapInput{Watch: uint32(index), Object: raw}})
		switch {
		case errors.Is(err, wasm.ErrClosed) && p.Module() != v.mod:
			continue
		case err != nil && parent.Err() != nil: // the controller stops: no failure of the plugin's
			log.V(1).Info("not mapping the object: the plugin's controller is stopping", "error", err.Error())
			return nil
		case errors.Is(err, wasm.ErrTimedOut):
			p.mapTimeouts.add(version)
			err = &timedOut{plugin: p.cfg.Name, timeout: p.cfg.ReconcileTimeout(), isMap: true, err: err}
		}
		p.mapFailures.record(err, p.onFailing)
		if err != nil {
			p.countMap(mapOutcome(err))
			msg := "the plugin's map function failed: the object maps to nothing"
			if errors.Is(err, wasm.ErrThrottled) {
				if after, ok := p.retryMap(parent, w, o, try); ok {
					msg = fmt.Sprintf("the plugin's map function could not run: it is tried again in %s", after)
				} else {
					msg = fmt.Sprintf("the plugin's map function could not run, and %d maps wait to be tried again already: the object maps to nothing", maxMapRetries)
				}
			}
			if v.mod.AdmitLog(len(err.Error())) {
				log.Error(err, msg, reconcile.StackOf(err)...)
			}
			return nil
		}
		p.countMap("ok")
		return p.admitMapped(got, log)
	}
	return nil
}

// admitMapped are the requests a map returned that the plugin may reconcile: those that fit
// the For kind's scope (a namespace for a namespaced kind, none for a cluster-scoped one) and,
// if it has namespaces, lie in them. What else it named is logged as an error (the plugin's),
// within the log limit.
func (p *Plugin) admitMapped(got []abi.Request, log logr.Logger) []reconcile.Request {
	namespaced := true
	if m, err := p.host.mapper.RESTMapping(p.forGVK.GroupKind(), p.forGVK.Version); err == nil {
		namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	reqs := make([]reconcile.Request, 0, len(got))
	for _, r := range got {
		why := ""
		switch ns := p.cfg.Namespaces; {
		case namespaced && r.Namespace == "":
			why = fmt.Sprintf("it has no namespace, and %s is namespaced", p.forGVK.Kind)
		case !namespaced && r.Namespace != "":
			why = fmt.Sprintf("it has a namespace, and %s is cluster-scoped", p.forGVK.Kind)
		case len(ns) > 0 && r.Namespace != "" && !slices.Contains(ns, r.Namespace):
			why = fmt.Sprintf("its namespace is not one of the plugin's (%s)", strings.Join(ns, ", "))
		}
		if why != "" {
			if msg := "the plugin's map function named an object it may not reconcile: not enqueued"; p.Module().AdmitLog(len(msg) + len(why)) {
				log.Error(errors.New(why), msg, "namespace", r.Namespace, "name", r.Name)
			}
			if f := p.cfg.Hooks.OnDropped; f != nil {
				p.dropTold.Do(func() {
					f(fmt.Sprintf("its map function named %s, which it may not reconcile (%s): not enqueued (said at most once a minute)", types.NamespacedName{Namespace: r.Namespace, Name: r.Name}, why))
				})
			}
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Name}})
	}
	return reqs
}

// mapOutcome is how wasmrec_plugin_maps_total counts a failed map.
func mapOutcome(err error) string {
	switch {
	case errors.Is(err, wasm.ErrTimedOut):
		return "timeout"
	case errors.Is(err, wasm.ErrThrottled):
		return "throttled"
	}
	return "error"
}

// maxMapRetries bounds the maps of a plugin waiting to be tried again (each holds its object).
const maxMapRetries = 4096

// mapRetryDelay is how long the try after try waits: 1 s, doubling, at most a minute.
func mapRetryDelay(try int) time.Duration { return min(time.Second<<min(try, 6), time.Minute) }

// retryMap maps o again after mapRetryDelay(try), while ctx (the controller's) lasts, and
// enqueues what it returns that this replica's shards take; false if maxMapRetries maps wait
// already.
func (p *Plugin) retryMap(ctx context.Context, w abi.Watch, o event.Object, try int) (time.Duration, bool) {
	if p.mapRetries.Add(1) > maxMapRetries {
		p.mapRetries.Add(-1)
		return 0, false
	}
	after := mapRetryDelay(try)
	time.AfterFunc(after, func() {
		defer p.mapRetries.Add(-1)
		if ctx.Err() != nil {
			return
		}
		var reqs []reconcile.Request
		for _, r := range p.mapInGuestTry(ctx, w, o, try+1) {
			if p.inShards(ctx, r) {
				reqs = append(reqs, r)
			}
		}
		p.ctrl.Enqueue(reqs...)
	})
	return after, true
}

// timedOutMap is a version of an object whose map timed out in a module.
type timedOutMap struct {
	digest, resourceVersion string
	uid                     types.UID
}

// mapTimeouts are the object versions whose maps timed out, at most maxMapTimeouts of them
// (past that they are all forgotten): each costs the plugin's whole timeout, and an update
// maps its old object again.
type mapTimeouts struct {
	mu   sync.Mutex
	seen map[timedOutMap]bool
}

const maxMapTimeouts = 4096

func (t *mapTimeouts) add(k timedOutMap) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil || len(t.seen) >= maxMapTimeouts {
		t.seen = map[timedOutMap]bool{}
	}
	t.seen[k] = true
}

func (t *mapTimeouts) has(k timedOutMap) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen[k]
}

// mapperOf is the version whose map export maps watch w, with the watch's index in its
// manifest: the live version, else a rollout's candidate; nil if neither maps w's kind so.
func (p *Plugin) mapperOf(w abi.Watch) (*version, int) {
	vs := []*version{p.current.Load()}
	if ro := p.ro.Load(); ro != nil {
		vs = append(vs, ro.cand)
	}
	for _, v := range vs {
		for i, mw := range v.mod.Manifest().Watches {
			if mw.Map == abi.MapFunc && mw.APIVersion == w.APIVersion && mw.Kind == w.Kind {
				return v, i
			}
		}
	}
	return nil, 0
}

// countMap counts a map's outcome: ok, error, timeout or skipped.
func (p *Plugin) countMap(outcome string) {
	if m := p.host.metrics; m != nil {
		m.Maps.WithLabelValues(p.cfg.Name, outcome).Inc()
	}
}

// rawObject is o's JSON: an informer's object holds it.
func rawObject(o event.Object) ([]byte, error) {
	if obj, ok := o.(*object.Object); ok && obj.Raw != nil {
		return obj.Raw, nil
	}
	return json.Marshal(o)
}

func objectKey(o event.Object) string {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}.String()
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
