package plugin

import (
	"context"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/plugin/internal/watches"
	"github.com/wasmrec/wasmrec/host/reconcile"
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

// mapFunc maps a watched object to For requests, as the watch's map mode says.
func (p *Plugin) mapFunc(mode string) handler.MapFunc {
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
