package source_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"k8s.io/client-go/util/workqueue"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func configMap(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// newSource is client-go's fake controller source holding objs, shut down when the test ends
// (after the informers over it, which stop first).
func newSource(t *testing.T, objs ...runtime.Object) *fcache.FakeControllerSource {
	src := fcache.NewFakeControllerSource()
	for _, o := range objs {
		src.Add(o)
	}
	t.Cleanup(src.Shutdown)
	return src
}

// listWatch lists and watches src. While held, its lists wait until released: each says so on
// listing first.
type listWatch struct {
	src *fcache.FakeControllerSource

	held    chan struct{}
	listing chan struct{}
	release sync.Once
}

func (l *listWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	if l.held != nil {
		l.listing <- struct{}{}
		<-l.held
	}
	return l.src.List(o)
}

func (l *listWatch) Watch(o metav1.ListOptions) (watch.Interface, error) { return l.src.Watch(o) }

// IsWatchListSemanticsUnSupported tells the reflector to list, not to stream the list with a
// watch (sendInitialEvents), which the fake source cannot.
func (l *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (l *listWatch) hold(t *testing.T) {
	l.held, l.listing = make(chan struct{}), make(chan struct{}, 10)
	t.Cleanup(l.releaseList)
}

func (l *listWatch) releaseList() { l.release.Do(func() { close(l.held) }) }

// runInformer runs a shared informer of ConfigMaps over lw until the test ends.
func runInformer(t *testing.T, lw toolscache.ListerWatcher) toolscache.SharedIndexInformer {
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return inf
}

func newQueue(t *testing.T) handler.Queue {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	return q
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// drain takes what q holds now, as "namespace/name", in order.
func drain(q handler.Queue) []string {
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		out = append(out, r.String())
		q.Done(r)
	}
	return out
}

// expect waits for the next Request in q and checks that it is want: the events an informer
// hands a handler come in order, so an event dropped before want would have come first.
func expect(t *testing.T, q handler.Queue, want string) {
	t.Helper()
	waitFor(t, want+" in the queue", func() bool { return q.Len() > 0 })
	r, _ := q.Get()
	q.Done(r)
	if r.String() != want {
		t.Fatalf("queued %s, want %s", r, want)
	}
}

func waitForSync(t *testing.T, s source.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
}

type ctxKey struct{}

// An informer source hands each event of its informer to the predicates, with Start's context,
// and those they let through to the handler, which queues Requests: every object listed by the
// time WaitForSync returns, then creations, updates and deletions as they come.
func TestInformerSourceQueuesTheEventsThePredicatesLetThrough(t *testing.T) {
	src := newSource(t, configMap("prod", "a"), configMap("dev", "b"))
	inf := runInformer(t, &listWatch{src: src})
	h := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o event.Object) []reconcile.Request {
		if ctx.Value(ctxKey{}) != "start" {
			t.Errorf("the handler was given a context other than Start's for %s/%s", o.GetNamespace(), o.GetName())
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
	})
	s := source.Informer(inf, h, predicate.Namespace("prod"))
	q := newQueue(t)
	if err := s.Start(context.WithValue(context.Background(), ctxKey{}, "start"), q); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	waitForSync(t, s)
	if got := drain(q); len(got) != 1 || got[0] != "prod/a" {
		t.Fatalf("after WaitForSync the queue holds %v, want [prod/a]: prod/a listed, dev/b not let through", got)
	}

	src.Add(configMap("dev", "c"))
	src.Add(configMap("prod", "d"))
	expect(t, q, "prod/d")
	changed := configMap("prod", "a")
	changed.Labels = map[string]string{"changed": "yes"}
	src.Modify(changed)
	expect(t, q, "prod/a")
	src.Delete(configMap("dev", "c"))
	src.Delete(configMap("prod", "d"))
	expect(t, q, "prod/d")
	if got := drain(q); len(got) > 0 {
		t.Errorf("the queue holds %v besides", got)
	}
}

// WaitForSync returns once the informer's first list has reached the handler, and not before;
// a context done first ends the wait with an error.
func TestInformerSourceWaitForSyncWaitsForTheInitialList(t *testing.T) {
	src := newSource(t, configMap("prod", "a"), configMap("prod", "b"))
	lw := &listWatch{src: src}
	lw.hold(t)
	inf := runInformer(t, lw)
	s := source.Informer(inf, handler.EnqueueRequestForObject())
	if err := s.WaitForSync(context.Background()); err == nil {
		t.Error("WaitForSync before Start returned no error")
	}
	q := newQueue(t)
	if err := s.Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	select {
	case <-lw.listing:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer does not list")
	}

	ctx, cancel := context.WithCancel(context.Background())
	synced := make(chan error, 1)
	go func() { synced <- s.WaitForSync(ctx) }()
	select {
	case err := <-synced:
		t.Fatalf("WaitForSync returned %v while the list is held", err)
	default:
	}
	cancel()
	if err := <-synced; err == nil {
		t.Fatal("WaitForSync returned no error though its context ended before the list")
	}

	go func() { synced <- s.WaitForSync(context.Background()) }()
	lw.releaseList()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitForSync has not returned after the list")
	}
	if got := drain(q); len(got) != 2 {
		t.Errorf("after WaitForSync the queue holds %v, want both objects listed", got)
	}
}

// Start twice is an error. Stop unregisters the handler: no event the informer hands out after
// Stop returns reaches the queue; the informer, the caller's, runs on. Start after Stop
// registers again: the objects the informer holds come as creations, then the events.
func TestInformerSourceStopsAndStartsAgain(t *testing.T) {
	src := newSource(t, configMap("prod", "a"))
	inf := runInformer(t, &listWatch{src: src})
	// Every event the informer hands out is also told here, in order.
	told := make(chan string, 100)
	tell := func(what string, obj any) {
		o := obj.(*corev1.ConfigMap)
		told <- what + " " + o.Namespace + "/" + o.Name
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tell("add", obj) },
		UpdateFunc: func(_, obj any) { tell("update", obj) },
		DeleteFunc: func(obj any) { tell("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	waitTold := func(want string) {
		t.Helper()
		for {
			select {
			case got := <-told:
				if got == want {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the informer has not handed out %q", want)
			}
		}
	}

	s := source.Informer(inf, handler.EnqueueRequestForObject())
	q := newQueue(t)
	if err := s.Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background(), q); err == nil || !strings.Contains(err.Error(), "already started") {
		t.Errorf("a second Start returned %v, want an error that says it is already started", err)
	}
	waitForSync(t, s)
	if got := drain(q); len(got) != 1 || got[0] != "prod/a" {
		t.Fatalf("after WaitForSync the queue holds %v, want [prod/a]", got)
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	changed := configMap("prod", "a")
	changed.Labels = map[string]string{"changed": "yes"}
	src.Modify(changed)
	waitTold("update prod/a")
	if got := drain(q); len(got) > 0 {
		t.Fatalf("after Stop the queue got %v", got)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	if err := s.WaitForSync(context.Background()); err == nil {
		t.Error("WaitForSync after Stop returned no error")
	}

	if err := s.Start(context.Background(), q); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	defer s.Stop()
	waitForSync(t, s)
	if got := drain(q); len(got) != 1 || got[0] != "prod/a" {
		t.Fatalf("started again, after WaitForSync the queue holds %v, want [prod/a]", got)
	}
	src.Add(configMap("prod", "b"))
	expect(t, q, "prod/b")
}

// Stop waits for an event being handled: once it returns, nothing more reaches the queue, even
// from an event the handler had begun before. (client-go's RemoveEventHandler does not wait.)
func TestStopWaitsForTheEventBeingHandled(t *testing.T) {
	src := newSource(t)
	inf := runInformer(t, &listWatch{src: src})
	entered, release := make(chan struct{}), make(chan struct{})
	var released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	defer letGo() // a failed test still lets the handler, and the informer, end
	slow := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o event.Object) []reconcile.Request {
		if o.GetName() == "slow" {
			close(entered)
			<-release
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
	})
	s := source.Informer(inf, slow)
	q := newQueue(t)
	if err := s.Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	waitForSync(t, s)
	src.Add(configMap("prod", "slow"))
	<-entered
	stopped := make(chan struct{})
	go func() {
		_ = s.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("Stop returned while an event was being handled")
	case <-time.After(100 * time.Millisecond):
	}
	letGo()
	<-stopped
	if got := drain(q); len(got) != 1 || got[0] != "prod/slow" {
		t.Fatalf("the queue holds %v, want the event handled before Stop returned", got)
	}
}

var widgets = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// newCache returns a host cache that maps Widgets if mapped, for an API server it never
// contacts: it is not started, and its informers do not run.
func newCache(t *testing.T, mapped bool) *cache.Cache {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	if mapped {
		mapper.Add(widgets, meta.RESTScopeNamespace)
	}
	c, err := cache.New(&rest.Config{Host: "https://apiserver.test"}, cache.Options{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A kind source holds the cache's shared informer of its key from Start to Stop: Start twice is
// an error, Stop lets go of the informer (the last user's release stops it) and Start after
// Stop takes it again. (The cache here has no API server: its informers never sync.)
func TestKindSourceHoldsTheSharedInformerFromStartToStop(t *testing.T) {
	c := newCache(t, true)
	key := cache.Key{GroupVersionKind: widgets, Namespace: "prod"}
	s := source.Kind(c, key, handler.EnqueueRequestForObject())
	q := newQueue(t)
	if err := s.WaitForSync(context.Background()); err == nil {
		t.Error("WaitForSync before Start returned no error")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("Stop before Start: %v", err)
	}

	if err := s.Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if !c.Active(key) {
		t.Fatal("after Start the cache has no informer for the key")
	}
	if err := s.Start(context.Background(), q); err == nil || !strings.Contains(err.Error(), "already started") {
		t.Errorf("a second Start returned %v, want an error that says it is already started", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitForSync(ctx); err == nil {
		t.Error("WaitForSync on an informer that cannot sync returned no error though its context ended")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if c.Active(key) {
		t.Error("after Stop the cache still holds the informer, which nothing else uses")
	}

	// Another user's handle keeps the informer after Stop.
	other, err := c.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if err := s.Start(context.Background(), q); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !c.Active(key) {
		t.Error("Stop let go of the informer another user holds")
	}
}

// A kind source of a kind no resource serves fails to start, saying so, and stays stopped: a
// later Start tries again.
func TestKindSourceOfAnUnservedKindFailsToStart(t *testing.T) {
	c := newCache(t, false)
	s := source.Kind(c, cache.Key{GroupVersionKind: widgets}, handler.EnqueueRequestForObject())
	q := newQueue(t)
	for range 2 {
		err := s.Start(context.Background(), q)
		if err == nil || !strings.Contains(err.Error(), "no resource serves") {
			t.Fatalf("Start of an unserved kind returned %v, want an error that says no resource serves it", err)
		}
	}
	if err := s.WaitForSync(context.Background()); err == nil {
		t.Error("WaitForSync of a source that failed to start returned no error")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("Stop of a source that failed to start: %v", err)
	}
}

// lender lends a cache's informers and counts what is out, as a plugin's informer set does.
type lender struct {
	c   *cache.Cache
	mu  sync.Mutex
	out map[cache.Key]*cache.Informer
}

func (l *lender) Acquire(k cache.Key) (*cache.Informer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out[k] != nil {
		return nil, fmt.Errorf("%s lent twice", k)
	}
	inf, err := l.c.Acquire(k)
	if err == nil {
		l.out[k] = inf
	}
	return inf, err
}

func (l *lender) Release(k cache.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out[k].Release()
	delete(l.out, k)
}

// A kind source of lent informers takes its key's informer at Start and gives it back to the
// lender at Stop, once each time.
func TestKindFromTakesItsInformerFromTheLender(t *testing.T) {
	c := newCache(t, true)
	l := &lender{c: c, out: map[cache.Key]*cache.Informer{}}
	key := cache.Key{GroupVersionKind: widgets, Namespace: "prod"}
	s := source.KindFrom(l, key, handler.EnqueueRequestForObject())
	q := newQueue(t)
	for range 2 {
		if err := s.Start(context.Background(), q); err != nil {
			t.Fatal(err)
		}
		if len(l.out) != 1 || !c.Active(key) {
			t.Fatalf("after Start the lender has lent %d informers (cache active: %v), want 1", len(l.out), c.Active(key))
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		if len(l.out) != 0 || c.Active(key) {
			t.Fatalf("after Stop %d informers are still lent", len(l.out))
		}
	}
}
