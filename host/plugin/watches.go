package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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
	"github.com/wasmrec/wasmrec/host/plugin/internal/hostcalls"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
)

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
