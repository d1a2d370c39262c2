package e2e

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
)

// Objects of a custom resource are reconciled, with the reconciler reading them from the cache;
// a spec change is reconciled again.
func TestCustomResourcesAreReconciled(t *testing.T) {
	ns := namespace(t)
	m := startManager(t, managerOptions())
	reads, err := m.GetCache().Acquire(widgetKey) // the reconciler's reads share the controller's informer
	if err != nil {
		t.Fatal(err)
	}
	defer reads.Release()

	seen := newRecorder[string]()
	c, err := controller.New("widgets", reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj, err := reads.Get(req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		u, err := obj.(*object.Object).Unstructured()
		if err != nil {
			return reconcile.Result{}, err
		}
		size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
		seen.add(fmt.Sprintf("%s=%d", req.Name, size))
		return reconcile.Result{}, nil
	}), controller.Options{MaxConcurrentReconciles: 2})
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.Watch(source.Kind(m.GetCache(), widgetKey, handler.EnqueueRequestForObject(), predicate.Namespace(ns))))
	must(t, m.Add(c))

	for i := range 3 {
		createWidget(t, ns, fmt.Sprint("w", i), map[string]any{"size": int64(i + 1)})
	}
	seen.waitUntil(t, "w0=1, w1=2, w2=3", 30*time.Second, func(s []string) bool {
		return slices.Contains(s, "w0=1") && slices.Contains(s, "w1=2") && slices.Contains(s, "w2=3")
	})

	patch := []byte(`{"spec":{"size":42}}`)
	if _, err := dyn(t).Resource(widgetGVR).Namespace(ns).Patch(context.Background(), "w1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	seen.waitUntil(t, "w1=42", 30*time.Second, func(s []string) bool { return slices.Contains(s, "w1=42") })
}

// A child with a controller owner reference gets its owner reconciled; a reference that is not
// the controller does not.
func TestOwnerIsReconciledWhenItsChildChanges(t *testing.T) {
	ns := namespace(t)
	m := startManager(t, managerOptions())
	seen := newRecorder[string]()
	c, err := controller.New("owners", reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		seen.add(req.String())
		return reconcile.Result{}, nil
	}), controller.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Only Owns: every reconcile here is caused by a child.
	cmKey := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), MetadataOnly: true}
	owns := handler.EnqueueRequestForOwner(m.GetCache().RESTMapper(), widgetGVK.GroupKind(), handler.OnlyControllerOwner())
	must(t, c.Watch(source.Kind(m.GetCache(), cmKey, owns, predicate.Namespace(ns))))
	must(t, m.Add(c))

	notController := createWidget(t, ns, "bystander", map[string]any{})
	owner := createWidget(t, ns, "owner", map[string]any{})
	cs := kubernetes.NewForConfigOrDie(cfg)
	child := func(name string, o *unstructured.Unstructured, isController bool) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: widgetGVK.GroupVersion().String(), Kind: widgetGVK.Kind, Name: o.GetName(), UID: o.GetUID(),
			Controller: ptr.To(isController),
		}}}}
	}
	// Created first, so its event is handled before the one we wait for.
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), child("plain-ref", notController, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), child("owned", owner, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := ns + "/owner"
	seen.waitUntil(t, want, 30*time.Second, func(s []string) bool { return slices.Contains(s, want) })
	if s := seen.snapshot(); slices.Contains(s, ns+"/bystander") {
		t.Fatalf("an owner reference without controller: true enqueued its owner: %v", s)
	}

	// A change to the child reconciles the owner again.
	n := len(seen.snapshot())
	patch := []byte(`{"data":{"k":"v"}}`)
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), "owned", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	seen.waitUntil(t, "a second reconcile of the owner", 30*time.Second, func(s []string) bool {
		return len(s) > n && s[len(s)-1] == want
	})
}

// A reconciler that always fails is retried after 5ms, 10ms, 20ms, ... with no 1s plateau
// (the worker-restart artefact seed 002 measured).
func TestFailingReconcileFollowsTheBackoffSchedule(t *testing.T) {
	const failures = 12
	ns := namespace(t)
	m := startManager(t, managerOptions())
	times := newRecorder[time.Time]()
	c, err := controller.New("always-fails", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		times.add(time.Now())
		return reconcile.Result{}, errors.New("this reconciler always fails")
	}), controller.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.Watch(source.Kind(m.GetCache(), widgetKey, handler.EnqueueRequestForObject(), predicate.Namespace(ns))))
	must(t, m.Add(c))
	createWidget(t, ns, "doomed", map[string]any{})

	// 5ms * (2^12 - 1) = 20.5s of backoff in all.
	seen := times.waitUntil(t, fmt.Sprint(failures+1, " reconciles"), 60*time.Second, func(s []time.Time) bool { return len(s) > failures })
	var report []string
	for n := range failures {
		gap := seen[n+1].Sub(seen[n])
		want := controller.DefaultBaseDelay << n
		report = append(report, fmt.Sprintf("%s (want %s)", gap.Round(100*time.Microsecond), want))
		// The queue never fires early; scheduling noise on a busy machine only adds.
		slack := 100*time.Millisecond + want/10
		if gap < want-time.Millisecond || gap > want+slack {
			t.Errorf("retry %d came %s after the previous attempt, want %s (+%s noise at most)", n+1, gap, want, slack)
		}
	}
	t.Logf("retry gaps: %s", strings.Join(report, ", "))
}

// A shared informer stops when the last controller using it leaves the manager.
func TestInformerStopsWhenItsLastUserLeaves(t *testing.T) {
	ns := namespace(t)
	m := startManager(t, managerOptions())
	secretKey := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("Secret"), MetadataOnly: true}
	base := informerGoroutines()

	newCtrl := func(name string) (*controller.Controller, *recorder[string]) {
		seen := newRecorder[string]()
		c, err := controller.New(name, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			seen.add(req.Name)
			return reconcile.Result{}, nil
		}), controller.Options{})
		if err != nil {
			t.Fatal(err)
		}
		must(t, c.Watch(source.Kind(m.GetCache(), secretKey, handler.EnqueueRequestForObject(), predicate.Namespace(ns))))
		must(t, m.Add(c))
		return c, seen
	}
	a, _ := newCtrl("secrets-a")
	b, seenB := newCtrl("secrets-b")
	cs := kubernetes.NewForConfigOrDie(cfg)
	secret := func(name string) {
		t.Helper()
		if _, err := cs.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	secret("first")
	seenB.waitUntil(t, "first", 30*time.Second, func(s []string) bool { return slices.Contains(s, "first") })
	if !m.GetCache().Active(secretKey) || informerGoroutines() <= base {
		t.Fatal("no informer running for secrets while two controllers watch them")
	}

	must(t, m.Remove(context.Background(), a))
	if !m.GetCache().Active(secretKey) {
		t.Fatal("the informer stopped while a controller still uses it")
	}
	secret("second")
	seenB.waitUntil(t, "second", 30*time.Second, func(s []string) bool { return slices.Contains(s, "second") })

	must(t, m.Remove(context.Background(), b))
	if m.GetCache().Active(secretKey) {
		t.Fatal("the informer is still registered after its last user left")
	}
	deadline := time.Now().Add(10 * time.Second)
	for informerGoroutines() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d informer goroutines still running after the last user left (baseline %d)", informerGoroutines(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// informerGoroutines counts goroutines running client-go informer machinery.
func informerGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "k8s.io/client-go/tools/cache.") {
			n++
		}
	}
	return n
}

func TestUnknownKindIsAClearError(t *testing.T) {
	m := startManager(t, managerOptions())
	gizmo := cache.Key{GroupVersionKind: schema.GroupVersionKind{Group: "nothing.wasmrec.dev", Version: "v1", Kind: "Gizmo"}}
	c, err := controller.New("gizmos", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), controller.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.Watch(source.Kind(m.GetCache(), gizmo, handler.EnqueueRequestForObject())))
	err = c.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Gizmo.v1.nothing.wasmrec.dev") || !strings.Contains(err.Error(), "CRD installed") {
		t.Fatalf("Start = %v, want an error naming the kind and asking whether its CRD is installed", err)
	}
	if m.GetCache().Active(gizmo) {
		t.Fatal("an informer was left behind for an unknown kind")
	}
}

func TestUnreachableAPIServerIsAClearError(t *testing.T) {
	bad := *cfg
	bad.Host = "https://127.0.0.1:1"
	bad.Timeout = 5 * time.Second
	c, err := cache.New(&bad, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(widgetKey)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "reachable") {
		t.Fatalf("Acquire = %v, want an error naming the server and saying to check it is reachable", err)
	}
}

func TestCRDThatNeverBecomesEstablished(t *testing.T) {
	crds, err := crd.Read("testdata/clashing-kind.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := crd.Uninstall(context.Background(), cfg, []string{"gadgets.e2e.wasmrec.dev"}, 0); err != nil {
			t.Error(err)
		}
	})
	err = crd.Install(context.Background(), cfg, crds, 3*time.Second)
	if err == nil || !strings.Contains(err.Error(), "gadgets.e2e.wasmrec.dev") || !strings.Contains(err.Error(), "NamesAccepted=False") {
		t.Fatalf("Install = %v, want an error naming the CRD and its NamesAccepted condition", err)
	}
	t.Logf("error: %v", err)
}

// An informer that cannot list (the credentials lack the permission) fails its sync within the
// cache's timeout, naming the kind.
func TestCacheSyncTimeoutNamesTheKind(t *testing.T) {
	user, err := cp.AddUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(user, cache.Options{SyncTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	defer func() { cancel(); <-done }()
	inf, err := c.Acquire(widgetKey)
	if err != nil {
		t.Fatal(err)
	}
	defer inf.Release()
	err = inf.WaitForSync(context.Background())
	if err == nil || !strings.Contains(err.Error(), "timed out after 2s") || !strings.Contains(err.Error(), "Widget.v1.") {
		t.Fatalf("WaitForSync = %v, want a timeout naming the kind", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
