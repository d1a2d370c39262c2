package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/wasmrec/wasmrec/host/shard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeHost is the host the fake API server is said to be at.
const fakeHost = "https://apiserver.test"

// fakeAPI serves metadata-only Widgets from client-go's metadata fake: lists from its tracker
// (seeded with the objects given), watches from fake watchers that the test feeds, one per watch
// call, handed out on watches in the order they are opened.
type fakeAPI struct {
	*metadatafake.FakeMetadataClient
	watches chan *watch.RaceFreeFakeWatcher

	mu     sync.Mutex
	listed []metav1.ListOptions
}

var _ metadata.Interface = (*fakeAPI)(nil)

func newFakeAPI(t *testing.T, objs ...runtime.Object) *fakeAPI {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{FakeMetadataClient: metadatafake.NewSimpleMetadataClient(scheme, objs...), watches: make(chan *watch.RaceFreeFakeWatcher, 100)}
	api.PrependWatchReactor("widgets", func(clienttesting.Action) (bool, watch.Interface, error) {
		w := watch.NewRaceFreeFake()
		select {
		case api.watches <- w:
		default:
			t.Error("more than 100 watches opened")
		}
		return true, w, nil
	})
	return api
}

// nextWatch returns the next watch the cache opens.
func (a *fakeAPI) nextWatch(t *testing.T) *watch.RaceFreeFakeWatcher {
	t.Helper()
	select {
	case w := <-a.watches:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("no watch opened")
		return nil
	}
}

// Resource is the fake's, recording the options of each list: the fake's actions keep only
// their selectors of labels and fields.
func (a *fakeAPI) Resource(r schema.GroupVersionResource) metadata.Getter {
	return listRecorder{Getter: a.FakeMetadataClient.Resource(r), api: a}
}

type listRecorder struct {
	metadata.Getter
	api *fakeAPI
}

func (l listRecorder) Namespace(ns string) metadata.ResourceInterface {
	return namespaceListRecorder{ResourceInterface: l.Getter.Namespace(ns), api: l.api}
}

type namespaceListRecorder struct {
	metadata.ResourceInterface
	api *fakeAPI
}

func (l namespaceListRecorder) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	l.api.mu.Lock()
	l.api.listed = append(l.api.listed, opts)
	l.api.mu.Unlock()
	return l.ResourceInterface.List(ctx, opts)
}

// lists returns the options of the list calls made so far.
func (a *fakeAPI) lists() []metav1.ListOptions {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.listed)
}

// watchOptions returns the options of the watch calls made so far.
func (a *fakeAPI) watchOptions() []metav1.ListOptions {
	var out []metav1.ListOptions
	for _, act := range a.Actions() {
		if w, ok := act.(clienttesting.WatchActionImpl); ok {
			out = append(out, w.ListOptions)
		}
	}
	return out
}

// startCache runs a Cache whose metadata-only informers list and watch through api, until the
// test ends.
func startCache(t *testing.T, api *fakeAPI, opts Options) *Cache {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(widgets, meta.RESTScopeNamespace)
	opts.Mapper = mapper
	c, err := New(&rest.Config{Host: fakeHost}, opts)
	if err != nil {
		t.Fatal(err)
	}
	c.metadata = api // before any Acquire: newInformer reads it
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	})
	return c
}

func widget(namespace, name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: widgets.GroupVersion().String(), Kind: widgets.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name)},
	}
}

func acquire(t *testing.T, c *Cache, key Key) *Informer {
	t.Helper()
	inf, err := c.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	return inf
}

func waitForSync(t *testing.T, inf *Informer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inf.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
}

// eventually waits until cond holds, for at most 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func has(inf *Informer, namespace, name string) bool {
	_, err := inf.Get(namespace, name)
	return err == nil
}

var prodWidgets = Key{GroupVersionKind: widgets, MetadataOnly: true, Namespace: "prod"}

// Two users of one key share one informer: one list, one watch. Its first user's release
// (twice: Release is idempotent) leaves it running for the other, still following the watch;
// the last release stops it and its watch.
func TestAcquireSharesOneInformer(t *testing.T) {
	api := newFakeAPI(t, widget("prod", "a"))
	c := startCache(t, api, Options{})
	first, second := acquire(t, c, prodWidgets), acquire(t, c, prodWidgets)
	if first.entry != second.entry {
		t.Error("two acquires of one key made two informers")
	}
	waitForSync(t, first)
	waitForSync(t, second)
	w := api.nextWatch(t)
	if n := len(api.lists()); n != 1 {
		t.Errorf("%d lists for two users of one key, want 1", n)
	}
	if sizes := c.Sizes(); len(sizes) != 1 || sizes[prodWidgets] != 1 {
		t.Errorf("sizes: %v, want one informer holding 1 object", sizes)
	}

	first.Release()
	first.Release()
	if !c.Active(prodWidgets) {
		t.Fatal("the informer stopped while a user still holds it")
	}
	if w.IsStopped() {
		t.Fatal("the watch stopped while a user still holds the informer")
	}
	w.Add(widget("prod", "b"))
	eventually(t, "the remaining user does not see an object added over the watch", func() bool { return has(second, "prod", "b") })

	second.Release()
	if c.Active(prodWidgets) {
		t.Error("the informer is still there after its last user released it")
	}
	if !w.IsStopped() {
		t.Error("the watch still runs after the last user released the informer")
	}
	if keys := c.ActiveKeys(widgets); len(keys) != 0 {
		t.Errorf("active keys after the last release: %v", keys)
	}
}

// Release of the last user stops the informer's watch before it returns, and forgets the
// informer: the next Acquire lists and watches afresh, into a new store.
func TestReleaseStartsAfresh(t *testing.T) {
	api := newFakeAPI(t, widget("prod", "a"))
	c := startCache(t, api, Options{})
	inf := acquire(t, c, prodWidgets)
	waitForSync(t, inf)
	w1 := api.nextWatch(t)
	w1.Add(widget("prod", "watched")) // only ever seen over this watch: the next list has it not
	eventually(t, "an object added over the watch is not in the cache", func() bool { return has(inf, "prod", "watched") })

	inf.Release()
	if !w1.IsStopped() {
		t.Error("Release returned with the informer's watch still open")
	}
	if c.Active(prodWidgets) || len(c.Sizes()) != 0 {
		t.Errorf("a released informer is still there: %v", c.Sizes())
	}

	again := acquire(t, c, prodWidgets)
	defer again.Release()
	waitForSync(t, again)
	w2 := api.nextWatch(t)
	if w2 == w1 || w2.IsStopped() {
		t.Error("the informer acquired again does not watch afresh")
	}
	if n := len(api.lists()); n != 2 {
		t.Errorf("%d lists, want 2: one per informer", n)
	}
	if has(again, "prod", "watched") {
		t.Error("the informer acquired again holds an object of the released one's store")
	}
	if !has(again, "prod", "a") {
		t.Error("the informer acquired again does not hold what its list returned")
	}
	w2.Add(widget("prod", "b"))
	eventually(t, "the informer acquired again does not follow its watch", func() bool { return has(again, "prod", "b") })
}

// A list that never returns makes WaitForSync fail after SyncTimeout, naming the informer, its
// resource and the server, and what to check; it is not a refusal. A caller that stops waiting
// first is told so, not that the sync timed out.
func TestWaitForSyncTimesOut(t *testing.T) {
	const timeout = 100 * time.Millisecond
	c, inf := hangingList(t, timeout)

	guard, cancelGuard := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelGuard()
	start := time.Now()
	err := inf.WaitForSync(guard)
	took := time.Since(start)
	want := "cache: timed out after 100ms waiting for the Widget.v1.example.com (metadata only) in namespace prod informer " +
		"(example.com/v1, Resource=widgets on " + fakeHost + ") to sync: is the resource served and listable with these credentials?"
	if err == nil || err.Error() != want {
		t.Fatalf("WaitForSync with a list that does not return: %v, want %q", err, want)
	}
	if took < timeout || took > 5*time.Second {
		t.Errorf("WaitForSync failed after %s, want after the sync timeout of %s", took, timeout)
	}
	var refused *RefusedError
	if errors.As(err, &refused) || inf.Refused() != nil {
		t.Errorf("a list that does not return counts as refused: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if c.WaitForCacheSync(ctx) {
		t.Error("WaitForCacheSync says an informer whose list does not return has synced")
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	err = inf.WaitForSync(ctx)
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "timed out") {
		t.Errorf("WaitForSync with a cancelled context: %v, want it to say it stopped waiting", err)
	}
}

// A caller's deadline that comes before SyncTimeout fails the wait as a timeout, but not as
// one of SyncTimeout: the error names no duration (the caller knows its own).
func TestWaitForSyncCallersDeadline(t *testing.T) {
	_, inf := hangingList(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := inf.WaitForSync(ctx)
	want := "cache: timed out waiting for the Widget.v1.example.com (metadata only) in namespace prod informer " +
		"(example.com/v1, Resource=widgets on " + fakeHost + ") to sync: is the resource served and listable with these credentials?"
	if err == nil || err.Error() != want {
		t.Errorf("WaitForSync past the caller's deadline: %v, want %q", err, want)
	}
}

// A handler that has not taken the informer's first list by the sync timeout, though the
// informer has it, is named as the cause, not the API server or the credentials.
func TestWaitForSyncNamesASlowHandler(t *testing.T) {
	api := newFakeAPI(t)
	if err := api.Tracker().Add(widget("prod", "a")); err != nil {
		t.Fatal(err)
	}
	c := startCache(t, api, Options{SyncTimeout: 200 * time.Millisecond})
	inf := acquire(t, c, prodWidgets)
	t.Cleanup(inf.Release)
	waitForSync(t, inf)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) }) // before the informer stops (cleanups run last first)
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { <-stuck }})
	if err != nil {
		t.Fatal(err)
	}
	err = inf.WaitForSync(context.Background(), reg)
	if err == nil || !strings.Contains(err.Error(), "waiting for an event handler of the") || !strings.Contains(err.Error(), "the handler is slow") {
		t.Fatalf("WaitForSync with a handler stuck on its first object: %v", err)
	}
}

// hangingList returns a running Cache with SyncTimeout timeout and an informer of prodWidgets
// whose list has begun and does not return until the test ends.
func hangingList(t *testing.T, timeout time.Duration) (*Cache, *Informer) {
	t.Helper()
	api := newFakeAPI(t)
	listing, unblock := make(chan struct{}, 1), make(chan struct{})
	api.PrependReactor("list", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case listing <- struct{}{}:
		default:
		}
		<-unblock              // the fake takes no context: the test lets it go before the informer stops
		return false, nil, nil // then the tracker answers
	})
	c := startCache(t, api, Options{SyncTimeout: timeout})
	inf := acquire(t, c, prodWidgets)
	t.Cleanup(inf.Release) // after the list is let go (cleanups run last first)
	t.Cleanup(func() { close(unblock) })
	select {
	case <-listing:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer did not list")
	}
	return c, inf
}

// refusingAPI is a fakeAPI whose lists of Widgets the API server refuses (403). Each list waits
// for the gate open at the time.
type refusingAPI struct {
	*fakeAPI
	mu   sync.Mutex
	gate chan struct{}
}

func newRefusingAPI(t *testing.T) *refusingAPI {
	api := &refusingAPI{fakeAPI: newFakeAPI(t), gate: make(chan struct{})}
	close(api.gate)
	api.PrependReactor("list", "widgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		api.mu.Lock()
		gate := api.gate
		api.mu.Unlock()
		<-gate
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", errors.New(`User "host" cannot list resource "widgets"`))
	})
	return api
}

// hold makes the next lists wait until the function it returns is called.
func (a *refusingAPI) hold() (open func()) {
	gate := make(chan struct{})
	a.mu.Lock()
	a.gate = gate
	a.mu.Unlock()
	return func() { close(gate) }
}

// A list the API server refuses (403) is reported as refused: WaitForSyncUnlessRefused returns
// the *RefusedError at once, WaitForCacheSync does not wait for it, Failures has it, and a
// WaitForSync that times out says the refusal is why.
func TestRefusedListIsNotASyncTimeout(t *testing.T) {
	const missing = "the host cannot list example.com/widgets in prod: grant its ServiceAccount list and watch on them"

	t.Run("unless refused", func(t *testing.T) {
		c := startCache(t, newRefusingAPI(t).fakeAPI, Options{SyncTimeout: time.Minute})
		inf := acquire(t, c, prodWidgets)
		defer inf.Release()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := inf.WaitForSyncUnlessRefused(ctx)
		if !isRefusedError(err) {
			t.Fatalf("WaitForSyncUnlessRefused on a refused list: %v, want a *RefusedError", err)
		}
		if f := err.(*RefusedError).Failure; f.Key != prodWidgets || f.Verb != "list" || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), missing) {
			t.Errorf("the refusal: %v (%+v), want the 403 of the list of %s", err, f, prodWidgets)
		}
		if f := c.Failures(); len(f) != 1 || !f[0].Refused() || f[0].Key != prodWidgets {
			t.Errorf("failures: %+v, want the refused list of %s", f, prodWidgets)
		}
		if !c.WaitForCacheSync(ctx) {
			t.Error("WaitForCacheSync waits for an informer whose list is refused")
		}
	})

	t.Run("timed out", func(t *testing.T) {
		const timeout = 100 * time.Millisecond
		c := startCache(t, newRefusingAPI(t).fakeAPI, Options{SyncTimeout: timeout})
		inf := acquire(t, c, prodWidgets)
		defer inf.Release()
		eventually(t, "the refused list is not reported", func() bool { return inf.Refused() != nil })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := inf.WaitForSync(ctx)
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "timed out after 100ms waiting for the "+prodWidgets.String()+" informer to sync: "+missing) {
			t.Errorf("WaitForSync on a refused list: %v, want a timeout that says the list is refused", err)
		}
	})

	// The refusal arrives while readers wait, or as they begin to: each is told it is refused,
	// neither that it stopped waiting (the refusal must be readable once its waiters wake) nor,
	// later, that it timed out.
	t.Run("while waiting", func(t *testing.T) {
		api := newRefusingAPI(t)
		c := startCache(t, api.fakeAPI, Options{SyncTimeout: time.Minute})
		for range 200 {
			open := api.hold()
			inf := acquire(t, c, prodWidgets)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			errs := make(chan error, 4)
			for range cap(errs) {
				go func() { errs <- inf.WaitForSyncUnlessRefused(ctx) }()
			}
			open()
			for range cap(errs) {
				if err := <-errs; !isRefusedError(err) {
					t.Errorf("a reader waiting when the list was refused: %v, want a *RefusedError", err)
				}
			}
			cancel()
			inf.Release()
			if t.Failed() {
				break
			}
		}
	})
}

// An informer of one shard keeps the objects of that shard only, when the API server does not
// filter (the fake ignores ShardSelector): it asks for the shard on list and watch, drops other
// objects from the list and from the watch without handing them to handlers, and says once that
// the server does not filter.
func TestShardFilter(t *testing.T) {
	sh := shard.Of(shard.ByNamespace, 0, 2)
	in, out := namespaceOf(t, sh, true), namespaceOf(t, sh, false)
	var (
		logMu sync.Mutex
		logs  []string
	)
	log := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, prefix+" "+args)
	}, funcr.Options{})
	api := newFakeAPI(t, widget(in, "a"), widget(out, "b"))
	c := startCache(t, api, Options{Logger: log})
	key := Key{GroupVersionKind: widgets, MetadataOnly: true, Shard: sh}
	inf := acquire(t, c, key)
	defer inf.Release()
	events := make(chan string, 10)
	record := func(verb string) func(any) {
		return func(obj any) {
			m, _ := meta.Accessor(obj)
			events <- verb + " " + m.GetNamespace() + "/" + m.GetName()
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record("add"),
		UpdateFunc: func(_, obj any) { record("update")(obj) },
		DeleteFunc: record("delete"),
	}); err != nil {
		t.Fatal(err)
	}
	waitForSync(t, inf)
	w := api.nextWatch(t)

	if objs, _ := inf.List("", nil); len(objs) != 1 || !has(inf, in, "a") {
		t.Errorf("the shard's informer holds %d objects, want only %s/a of its shard", len(objs), in)
	}
	if _, err := inf.Get(out, "b"); !apierrors.IsNotFound(err) {
		t.Errorf("an object of another shard: %v, want not found", err)
	}
	sel := sh.Selector().String()
	lists, watches := api.lists(), api.watchOptions()
	if len(lists) != 1 || len(watches) != 1 {
		t.Errorf("%d lists and %d watches, want 1 of each", len(lists), len(watches))
	}
	for _, o := range append(lists, watches...) {
		if o.ShardSelector != sel {
			t.Errorf("a list or watch asked for shard %q, want %q", o.ShardSelector, sel)
		}
	}

	w.Add(widget(out, "c"))
	w.Modify(widget(out, "b"))
	w.Delete(widget(out, "b"))
	w.Add(widget(in, "d")) // after the others: once it is handed on, they have been seen
	var got []string
	for len(got) < 2 {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("events handed on: %v, want the add of %s/d", got, in)
		}
	}
	if want := []string{"add " + in + "/a", "add " + in + "/d"}; !slices.Equal(got, want) {
		t.Errorf("events handed on: %v, want %v", got, want)
	}
	if has(inf, out, "c") {
		t.Error("an object of another shard added over the watch is in the cache")
	}

	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(strings.Join(logs, "\n"), "does not filter by shard"); n != 1 {
		t.Errorf("%d log lines say the API server does not filter by shard, want 1:\n%s", n, strings.Join(logs, "\n"))
	}
}

// isRefusedError tells whether err is a *RefusedError itself, not one wrapped in another error
// (a sync timeout's).
func isRefusedError(err error) bool {
	_, ok := err.(*RefusedError)
	return ok
}

// namespaceOf returns a namespace whose objects are in sh (or not in it).
func namespaceOf(t *testing.T, sh shard.Shard, in bool) string {
	t.Helper()
	for i := range 100 {
		ns := fmt.Sprintf("team-%d", i)
		if sh.Matches(widget(ns, "x")) == in {
			return ns
		}
	}
	t.Fatalf("no namespace found in (%v) shard %s", in, sh)
	return ""
}
