package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/shard"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// Options configure a Cache. The zero value is ready to use.
type Options struct {
	// SyncTimeout bounds how long WaitForSync waits for an informer's first list.
	// Defaults to 2 minutes.
	SyncTimeout time.Duration

	// ResyncPeriod is how often informers replay their contents as updates. Defaults to 10 hours,
	// as controller-runtime; a negative value turns resyncs off.
	ResyncPeriod time.Duration

	// Mapper maps kinds to resources. Defaults to a Mapper (see NewMapper).
	Mapper meta.RESTMapper

	// Logger defaults to logr.Discard().
	Logger logr.Logger
}

func (o Options) withDefaults() Options {
	if o.SyncTimeout == 0 {
		o.SyncTimeout = 2 * time.Minute
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = 10 * time.Hour
	}
	if o.ResyncPeriod < 0 {
		o.ResyncPeriod = 0
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

// Key names a shared informer: a kind, and whether it holds only metadata.
type Key struct {
	schema.GroupVersionKind
	// MetadataOnly informers hold *metav1.PartialObjectMetadata: cheaper for kinds a controller
	// only maps to owners (Owns) or keys (Watches).
	MetadataOnly bool
	// Namespace, if set, limits the informer to one namespace: it lists and watches there
	// only. Ignored for cluster-scoped kinds (Acquire clears it).
	Namespace string
	// Shard, if set, limits the informer to one shard of the kind's objects: it lists and
	// watches with the shard's selector, and keeps only the objects the shard selects even
	// when the API server does not filter (its ShardedListAndWatch feature gate is off).
	Shard shard.Shard
}

func (k Key) String() string {
	s := kinds.GVK(k.GroupVersionKind)
	if k.MetadataOnly {
		s += " (metadata only)"
	}
	if k.Namespace != "" {
		s += " in namespace " + k.Namespace
	}
	if !k.Shard.All() {
		s += ", shard " + k.Shard.String() + " by " + k.Shard.By()
	}
	return s
}

// Cache holds the host's shared informers. It is a manager Runnable: informers acquired before
// Start run from Start on; informers acquired later start at once.
//
// Its locks: mu guards ctx and informers, and is held while Acquire builds an informer;
// healthMu guards what is to be told of health changes, which every informer's reflector
// goroutine reports during an outage (hundreds at once on a busy host). They are apart so that
// those reports never wait on plugins acquiring and releasing informers, nor the other way; no
// path takes one while holding the other.
type Cache struct {
	opts     Options
	cfg      *rest.Config
	host     string
	mapper   meta.RESTMapper
	objects  *object.Client
	metadata metadata.Interface

	unsharded sync.Once // said that the API server does not filter by shard

	mu        sync.Mutex
	ctx       context.Context // the Start context; nil until Start
	informers map[Key]*entry

	// Told of informers whose health changed (see OnHealthChange), from Start's goroutine.
	healthMu sync.Mutex
	watchers []func(Key)
	changed  map[Key]bool // not yet told
	wake     chan struct{}
}

type entry struct {
	key      Key
	mapping  *meta.RESTMapping
	health   *health
	informer toolscache.SharedIndexInformer
	refs     int
	cancel   context.CancelFunc // nil until the informer runs
	done     chan struct{}      // closed when the informer has stopped
}

// New returns a Cache that reads from the API server cfg points at. It does not contact the
// server: the first Acquire does.
func New(cfg *rest.Config, opts Options) (*Cache, error) {
	opts = opts.withDefaults()
	objs, err := object.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: metadata client for %s: %w", cfg.Host, err)
	}
	mapper := opts.Mapper
	if mapper == nil {
		if mapper, err = NewMapper(cfg); err != nil {
			return nil, err
		}
	}
	return &Cache{
		opts:      opts,
		cfg:       rest.CopyConfig(cfg),
		host:      cfg.Host,
		mapper:    mapper,
		objects:   objs,
		metadata:  md,
		informers: make(map[Key]*entry),
		changed:   map[Key]bool{},
		wake:      make(chan struct{}, 1),
	}, nil
}

// RESTMapper returns the mapper the cache resolves kinds with.
func (c *Cache) RESTMapper() meta.RESTMapper { return c.mapper }

// Name names it in the manager's messages.
func (c *Cache) Name() string { return "the informer cache" }

// Start runs the informers acquired so far and any acquired later, until ctx is done; then it
// stops them all and returns once none is running.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.ctx != nil {
		c.mu.Unlock()
		return errors.New("cache: already started")
	}
	c.ctx = ctx
	for _, e := range c.informers {
		c.runLocked(e)
	}
	c.mu.Unlock()
	told := make(chan struct{})
	go func() {
		defer close(told)
		c.tellHealth(ctx)
	}()

	<-ctx.Done()
	<-told

	c.mu.Lock()
	var dones []chan struct{}
	for _, e := range c.informers {
		if e.done != nil {
			dones = append(dones, e.done)
		}
	}
	c.mu.Unlock()
	for _, d := range dones {
		<-d
	}
	return nil
}

// WaitForCacheSync waits until every informer acquired so far has synced, or has its list
// refused by the API server (403 Forbidden, 401 Unauthorized: waiting would not sync it; Failures
// says so, and a guest read of it fails at once); false if ctx ends first. The manager calls it
// before it starts controllers.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	type waiting struct{ synced, refused <-chan struct{} }
	c.mu.Lock()
	ws := make([]waiting, 0, len(c.informers))
	for _, e := range c.informers {
		e.health.mu.Lock()
		ws = append(ws, waiting{e.informer.HasSyncedChecker().Done(), e.health.refused})
		e.health.mu.Unlock()
	}
	c.mu.Unlock()
	for _, w := range ws {
		select {
		case <-w.synced:
		case <-w.refused:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// Acquire returns a handle on the shared informer for key, creating it on first use (and
// starting it if the cache runs). Every Acquire must be paired with one Release.
func (c *Cache) Acquire(key Key) (*Informer, error) {
	mapping, err := c.mapping(key.GroupVersionKind)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		key.Namespace = "" // one informer per cluster-scoped kind, whoever asks
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.informers[key]
	if !ok {
		e = &entry{key: key, mapping: mapping, health: newHealth(key, mapping.Resource, func() { c.healthChanged(key) })}
		if e.informer, err = c.newInformer(key, mapping, e.health); err != nil {
			return nil, err
		}
		c.informers[key] = e
		if c.ctx != nil {
			c.runLocked(e)
		}
		c.opts.Logger.V(1).Info("informer created", "gvk", key.String(), "resource", mapping.Resource.String())
	}
	e.refs++
	return &Informer{cache: c, entry: e}, nil
}

// Active reports whether a shared informer for key exists (acquired and not yet released by its
// last user).
func (c *Cache) Active(key Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.informers[key]
	return ok
}

// Sizes counts the objects each informer holds now, by key.
func (c *Cache) Sizes() map[Key]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Key]int, len(c.informers))
	for k, e := range c.informers {
		out[k] = len(e.informer.GetStore().ListKeys())
	}
	return out
}

// ActiveKeys lists the keys of the shared informers of gvk that exist now, in every namespace and
// mode (full or metadata only).
func (c *Cache) ActiveKeys(gvk schema.GroupVersionKind) []Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Key
	for k := range c.informers {
		if k.GroupVersionKind == gvk {
			out = append(out, k)
		}
	}
	return out
}

// mapping resolves gvk to a resource, with an error that says what to check.
func (c *Cache) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return m, nil
	case meta.IsNoMatchError(err):
		return nil, fmt.Errorf("cache: no resource serves %s on %s: is its CRD installed and established? (%w)", kinds.GVK(gvk), c.host, err)
	default:
		return nil, fmt.Errorf("cache: looking up %s on the API server at %s: %w: check that the API server is reachable and the kubeconfig is right", gvk, c.host, err)
	}
}

// newInformer builds the informer of key, as dynamicinformer and metadatainformer do, with its
// list and watch calls reported to h. Built-in kinds come in protobuf, which the API server
// encodes and the host decodes faster than JSON, and become object.Objects as they arrive; other
// kinds come in JSON, straight into object.Objects.
func (c *Cache) newInformer(key Key, m *meta.RESTMapping, h *health) (toolscache.SharedIndexInformer, error) {
	var (
		list      func(context.Context, metav1.ListOptions) (runtime.Object, error)
		watchFn   func(context.Context, metav1.ListOptions) (watch.Interface, error)
		example   runtime.Object
		client    any
		transform toolscache.TransformFunc = stripMetadata
	)
	switch typed, err := kubescheme.Scheme.New(key.GroupVersionKind); {
	case key.MetadataOnly:
		r := c.metadata.Resource(m.Resource).Namespace(key.Namespace)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, o) }
		watchFn, example, client = r.Watch, &metav1.PartialObjectMetadata{}, c.metadata
	case err == nil:
		rc, err := c.protobufClient(m.Resource.GroupVersion())
		if err != nil {
			return nil, err
		}
		gvk, listGVK := key.GroupVersionKind, key.GroupVersionKind.GroupVersion().WithKind(key.Kind+"List")
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			out, err := kubescheme.Scheme.New(listGVK)
			if err != nil {
				return nil, err
			}
			return out, rc.Get().Namespace(key.Namespace).Resource(m.Resource.Resource).VersionedParams(&o, kubescheme.ParameterCodec).Do(ctx).Into(out)
		}
		watchFn = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return rc.Get().Namespace(key.Namespace).Resource(m.Resource.Resource).VersionedParams(&o, kubescheme.ParameterCodec).Watch(ctx)
		}
		example, client = typed, rc
		transform = func(obj any) (any, error) {
			if t, ok := obj.(runtime.Object); ok {
				return object.FromTyped(t, gvk)
			}
			return obj, nil
		}
	default:
		r := c.objects.Resource(m.Resource, key.Namespace)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, o) }
		watchFn, example, client = r.Watch, &object.Object{}, c.objects
	}
	log := c.opts.Logger.WithValues("gvk", key.String(), "resource", m.Resource.String())
	if !key.Shard.All() {
		list, watchFn = c.sharded(key.Shard, list, watchFn)
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (obj runtime.Object, err error) {
			err = h.patiently(ctx, log, c.host, "list", func() (err error) { obj, err = list(ctx, o); return err })
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (w watch.Interface, err error) {
			verb := "watch"
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				verb = watchList
			}
			err = h.patiently(ctx, log, c.host, verb, func() (err error) { w, err = watchFn(ctx, o); return err })
			return w, err
		},
	}
	inf := toolscache.NewSharedIndexInformerWithOptions(toolscache.ToListWatcherWithWatchListSemantics(lw, client), example, toolscache.SharedIndexInformerOptions{
		ResyncPeriod:      c.opts.ResyncPeriod,
		Indexers:          toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc},
		ObjectDescription: m.Resource.String(),
	})
	// Both setters only fail on a started informer; this one is new.
	_ = inf.SetTransform(transform)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *toolscache.Reflector, err error) {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return // the informer is being stopped (a controller restarting on other shards)
		}
		if IsRefused(err) {
			return // the list or watch call said so, naming itself (patiently)
		}
		h.failed(log, c.host, "", err)
	})
	return inf, nil
}

// sharded lists and watches only the objects of sh: it asks the API server to filter
// (ListOptions.ShardSelector) and filters again itself, since a server without the
// ShardedListAndWatch feature gate ignores the selector. The first object outside the shard
// that arrives shows a server that did not filter: the cache says so once, since the host then
// still receives and decodes every object.
func (c *Cache) sharded(sh shard.Shard, list func(context.Context, metav1.ListOptions) (runtime.Object, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) (func(context.Context, metav1.ListOptions) (runtime.Object, error), func(context.Context, metav1.ListOptions) (watch.Interface, error)) {
	sel := sh.Selector().String()
	keep := func(obj runtime.Object) bool {
		if sh.Matches(obj) {
			return true
		}
		c.unsharded.Do(func() {
			c.opts.Logger.Info("the API server does not filter by shard (is its ShardedListAndWatch feature gate on?): the host filters instead, so each replica still receives and decodes every object of its sharded kinds", "host", c.host)
		})
		return false
	}
	shardedList := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.ShardSelector = sel
		out, err := list(ctx, o)
		if err != nil {
			return nil, err
		}
		items, err := meta.ExtractListWithAlloc(out)
		if err != nil {
			return nil, err
		}
		kept := items[:0]
		for _, it := range items {
			if keep(it) {
				kept = append(kept, it)
			}
		}
		return out, meta.SetList(out, kept)
	}
	shardedWatch := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.ShardSelector = sel
		w, err := watchFn(ctx, o)
		if err != nil {
			return nil, err
		}
		// A namespace and a uid never change: an object stays in its shard for life.
		return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			switch e.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				return e, keep(e.Object)
			}
			return e, true // bookmarks and errors
		}), nil
	}
	return shardedList, shardedWatch
}

// protobufClient returns a REST client for the built-in kinds of gv that speaks protobuf.
func (c *Cache) protobufClient(gv schema.GroupVersion) (rest.Interface, error) {
	cfg := rest.CopyConfig(c.cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = kubescheme.Codecs.WithoutConversion()
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: REST client for %s on %s: %w", gv, c.host, err)
	}
	return rc, nil
}

// stripMetadata drops metadata.managedFields and the last-applied annotation from what a
// metadata-only informer holds: reconcilers never need them and they are often the larger part of
// an object. Full informers hold object.Objects, whose metadata comes without them.
func stripMetadata(obj any) (any, error) {
	if o, ok := obj.(*metav1.PartialObjectMetadata); ok {
		o.ManagedFields = nil
		delete(o.Annotations, object.LastApplied)
	}
	return obj, nil
}

// runLocked starts e under the cache's context. c.mu must be held and c.ctx set.
func (c *Cache) runLocked(e *entry) {
	ctx, cancel := context.WithCancel(c.ctx)
	e.cancel, e.done = cancel, make(chan struct{})
	go func() {
		defer close(e.done)
		e.informer.RunWithContext(ctx)
	}()
}

// release drops one reference to e; the last one stops and forgets the informer and waits until
// it has stopped.
func (c *Cache) release(e *entry) {
	c.mu.Lock()
	e.refs--
	if e.refs > 0 {
		c.mu.Unlock()
		return
	}
	delete(c.informers, e.key)
	cancel, done := e.cancel, e.done
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	c.opts.Logger.V(1).Info("informer stopped: no users left", "gvk", e.key.String())
}

// assert the object types the informers hold satisfy what handlers expect.
var (
	_ metav1.Object = (*object.Object)(nil)
	_ metav1.Object = (*metav1.PartialObjectMetadata)(nil)
)
