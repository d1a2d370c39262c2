package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// replica is one host of a leader-elected pair.
type replica struct {
	mgr     *manager.Manager
	metrics *metrics.Metrics
	logs    *logLines
	stop    context.CancelFunc
	done    chan error
}

// startReplica starts a host on the test API server that competes for the lease (3 s) named
// lease in ns; add gives it what to run before it starts. A replica that does not release its
// lease on stop is like a crashed process.
func startReplica(t *testing.T, ns, lease, identity string, release bool, add func(*manager.Manager, *plugin.Host)) *replica {
	t.Helper()
	le := &manager.LeaderElection{Namespace: ns, Name: lease, Identity: identity,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond, ReleaseOnCancel: ptr.To(release)}
	mgr, err := manager.New(cfg, manager.Options{LeaderElection: le, Logger: logr.Discard()})
	must(t, err)
	r := &replica{mgr: mgr, metrics: metrics.New(), logs: &logLines{}, done: make(chan error, 1)}
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Metrics: r.metrics, Logger: r.logs.logger()})
	must(t, err)
	t.Cleanup(host.Close)
	add(mgr, host) // its cleanups run after the manager has stopped (registered first, run last)
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// misbehaveReplica runs the misbehave plugin from the config, in ns.
func misbehaveReplica(t *testing.T, ns, identity string, release bool) *replica {
	t.Helper()
	return startReplica(t, ns, "wasmrec-e2e", identity, release, func(_ *manager.Manager, host *plugin.Host) {
		p, err := host.FetchAndLoad(context.Background(), plugin.Config{Name: "misbehave", Module: wasmFile(t, "testguests", "misbehave"),
			Namespaces: []string{ns}, Permissions: []abi.Permission{grant("", []string{"configmaps"}, "get", "list", "watch")}})
		must(t, err)
		t.Cleanup(func() { p.Close(context.Background()) })
		_, err = host.Run(p)
		must(t, err)
	})
}

func (r *replica) reconciled(t *testing.T) float64 {
	v, _ := value(t, r.metrics, "controller_runtime_reconcile_total", map[string]string{"controller": "misbehave", "result": "success"})
	return v
}

func (r *replica) isLeader() bool { return leads(r.mgr) }

// leads reports whether mgr was elected.
func leads(mgr *manager.Manager) bool {
	select {
	case <-mgr.Elected():
		return true
	default:
		return false
	}
}

// Two hosts on one API server: only the leader reconciles, the follower keeps its informers
// synced; when the leader dies without handing its lease back, the follower takes over within
// the lease duration and reconciles what changed in between.
func TestLeaderElectionFailover(t *testing.T) {
	ns := namespace(t)
	create := func(name string) { t.Helper(); misbehaving(t, ns, name) }
	a := misbehaveReplica(t, ns, "a", false) // dies without releasing, like a crashed process
	eventually(t, 30*time.Second, "a becoming the leader", func() error {
		if !a.isLeader() {
			return errors.New("not yet")
		}
		return nil
	})
	b := misbehaveReplica(t, ns, "b", true)
	cmKey := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	eventually(t, 30*time.Second, "the follower's informers warm", func() error {
		if !informerOf(b.mgr.GetCache(), cmKey) {
			return errors.New("no configmap informer on b")
		}
		return nil
	})
	create("one")
	eventually(t, 30*time.Second, "the leader reconciling", func() error {
		if got := a.reconciled(t); got != 1 {
			return fmt.Errorf("a reconciled %v", got)
		}
		return nil
	})
	if b.isLeader() || b.reconciled(t) != 0 {
		t.Fatalf("the follower reconciled (leader %v, count %v)", b.isLeader(), b.reconciled(t))
	}

	killed := time.Now()
	a.stop()
	if err := <-a.done; err != nil {
		t.Fatalf("a: %v", err)
	}
	a.done <- nil // for the cleanup
	create("two") // while nobody leads
	eventually(t, 30*time.Second, "b taking over", func() error {
		if !b.isLeader() {
			return errors.New("not yet")
		}
		return nil
	})
	took := time.Since(killed)
	t.Logf("b took over %s after a died (lease duration 3s)", took.Round(time.Millisecond))
	if took > 3*time.Second+2*time.Second {
		t.Errorf("takeover took %s, more than the lease duration and two retries", took)
	}
	create("three")
	// b starts with a fresh queue listing every object: one, two and three.
	eventually(t, 30*time.Second, "b reconciling everything", func() error {
		if got := b.reconciled(t); got < 3 {
			return fmt.Errorf("b reconciled %v", got)
		}
		return nil
	})
}

// pluginReplica runs the plugins of Plugin objects.
func pluginReplica(t *testing.T, ns, identity string) *replica {
	t.Helper()
	return startReplica(t, ns, "wasmrec-e2e-plugins", identity, false, func(mgr *manager.Manager, host *plugin.Host) {
		res, err := pluginobjects.New(host, pluginobjects.Options{Policy: anySource})
		must(t, err)
		must(t, mgr.Add(res))
	})
}

// leaderAndFollower starts two hosts running Plugin objects' plugins, a once it leads, then b.
func leaderAndFollower(t *testing.T, ns string) (a, b *replica) {
	t.Helper()
	a = pluginReplica(t, ns, "a")
	eventually(t, 30*time.Second, "a becoming the leader", func() error {
		if !a.isLeader() {
			return errors.New("not yet")
		}
		return nil
	})
	return a, pluginReplica(t, ns, "b")
}

// Two hosts run the plugins of Plugin objects: both load them, so the follower's informers are
// warm; only the leader reconciles and writes status and Events. When the leader dies, the
// follower takes over: it reconciles what changed meanwhile and rewrites every Plugin's status.
func TestPluginResourceOnTwoReplicas(t *testing.T) {
	ctx := context.Background()
	installPluginCRD(t)
	installThings(t)
	ns := namespace(t)
	a, b := leaderAndFollower(t, ns)

	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wasmrec.dev/v1alpha1", "kind": "Plugin",
		"metadata": map[string]any{"name": "paired"},
		"spec": map[string]any{"module": wasmFile(t, "testguests", "swap-v1"), "namespaces": []any{ns},
			"permissions": []any{map[string]any{"group": "follow.wasmrec.dev", "resources": []any{"things"}, "verbs": []any{"get", "list", "watch"}}}}}}
	_, err := dyn(t).Resource(pluginGVR).Create(ctx, clusterPlugin(t, obj), metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = dyn(t).Resource(pluginGVR).Delete(ctx, "paired", metav1.DeleteOptions{}) })
	// A paused one: nothing of it runs, so nothing but the election makes the new leader look
	// at it again.
	paused := obj.DeepCopy()
	paused.SetName("paired-paused")
	must(t, unstructured.SetNestedField(paused.Object, true, "spec", "paused"))
	_, err = dyn(t).Resource(pluginGVR).Create(ctx, paused, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = dyn(t).Resource(pluginGVR).Delete(ctx, "paired-paused", metav1.DeleteOptions{}) })
	readyIs := func(name, status, reason string) func() error {
		return func() error {
			u, err := dyn(t).Resource(pluginGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m := c.(map[string]any); m["type"] == "Ready" && m["status"] == status && m["reason"] == reason {
					return nil
				}
			}
			return fmt.Errorf("%s: want Ready=%s (%s): %v", name, status, reason, u.Object["status"])
		}
	}
	eventually(t, 30*time.Second, "the Plugin Ready", readyIs("paired", "True", "Serving"))
	eventually(t, 30*time.Second, "the paused Plugin's status", readyIs("paired-paused", "False", "Paused"))

	// Both replicas loaded it; the follower holds its informers but does not reconcile.
	thingKey := cache.Key{GroupVersionKind: schema.GroupVersionKind{Group: "follow.wasmrec.dev", Version: "v1", Kind: "Thing"}}
	eventually(t, 30*time.Second, "the follower's Thing informer warm", func() error {
		if !informerOf(b.mgr.GetCache(), thingKey) {
			return errors.New("no Thing informer on b")
		}
		return nil
	})
	thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "follow.wasmrec.dev/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"n": int64(1)}}}
	eventually(t, 30*time.Second, "creating a thing", func() error {
		_, err := dyn(t).Resource(thingGVR).Namespace(ns).Create(ctx, thing, metav1.CreateOptions{})
		return err
	})
	a.logs.waitFor(t, 30*time.Second, "v1 reconciled a n=1")
	if lines, _ := b.logs.matching("v1 reconciled"); len(lines) > 0 || b.isLeader() {
		t.Fatalf("the follower reconciled (leader %v): %q", b.isLeader(), lines)
	}
	loaded := func() (n int32) {
		evs, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Events("default").List(ctx,
			metav1.ListOptions{FieldSelector: "reason=Loaded,involvedObject.name=paired"})
		must(t, err)
		for _, e := range evs.Items {
			n += max(e.Count, 1)
		}
		return n
	}
	eventually(t, 10*time.Second, "a Loaded event", func() error {
		if loaded() == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	time.Sleep(time.Second) // the follower's, if it sent one, would be in by now
	if n := loaded(); n != 1 {
		t.Errorf("%d Loaded events, want 1 (the leader's)", n)
	}

	// The leader dies without releasing its lease. While nobody leads, the thing changes and
	// the Plugin's status goes stale; the new leader reconciles the one and rewrites the other.
	a.stop()
	if err := <-a.done; err != nil {
		t.Fatalf("a: %v", err)
	}
	a.done <- nil // for the cleanup
	_, err = dyn(t).Resource(thingGVR).Namespace(ns).Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"n":2}}`), metav1.PatchOptions{})
	must(t, err)
	stale := []byte(`{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"Stale","message":"written by the test","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	for _, name := range []string{"paired", "paired-paused"} {
		_, err = dyn(t).Resource(pluginGVR).Patch(ctx, name, types.MergePatchType, stale, metav1.PatchOptions{}, "status")
		must(t, err)
	}
	if b.isLeader() {
		t.Fatal("b led before a's lease ran out: the stale status may have been written after b's election")
	}
	eventually(t, 30*time.Second, "b taking over", func() error {
		if !b.isLeader() {
			return errors.New("not yet")
		}
		return nil
	})
	b.logs.waitFor(t, 30*time.Second, "v1 reconciled a n=2")
	eventually(t, 30*time.Second, "b rewriting the Plugin's status", readyIs("paired", "True", "Serving"))
	eventually(t, 30*time.Second, "b rewriting the paused Plugin's status", readyIs("paired-paused", "False", "Paused"))
}

// Swaps reach every replica, the follower too; deleting the Plugin then releases every informer
// its versions used, on both replicas (a swap re-enqueues its objects, and on a follower that
// once held an informer reference nothing gave back).
func TestDeletedPluginReleasesItsInformersOnEveryReplica(t *testing.T) {
	ctx := context.Background()
	installPluginCRD(t)
	installThings(t)
	ns := namespace(t)
	a, b := leaderAndFollower(t, ns)

	dir := t.TempDir()
	for _, v := range []string{"swap-v1", "swap-v3"} {
		writeModule(t, filepath.Join(dir, v+".wasm"), module2(t, v))
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wasmrec.dev/v1alpha1", "kind": "Plugin",
		"metadata": map[string]any{"name": "released"},
		"spec": map[string]any{"module": filepath.Join(dir, "swap-v1.wasm"), "namespaces": []any{ns},
			"permissions": []any{
				map[string]any{"group": "follow.wasmrec.dev", "resources": []any{"things"}, "verbs": []any{"get", "list", "watch"}},
				map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"list", "watch"}}}}}}
	_, err := dyn(t).Resource(pluginGVR).Create(ctx, clusterPlugin(t, obj), metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = dyn(t).Resource(pluginGVR).Delete(ctx, "released", metav1.DeleteOptions{}) })
	thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "follow.wasmrec.dev/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"n": int64(1)}}}
	eventually(t, 30*time.Second, "creating a thing", func() error {
		_, err := dyn(t).Resource(thingGVR).Namespace(ns).Create(ctx, thing, metav1.CreateOptions{})
		return err
	})
	a.logs.waitFor(t, 30*time.Second, "v1 reconciled a n=1")

	thingKey := cache.Key{GroupVersionKind: schema.GroupVersionKind{Group: "follow.wasmrec.dev", Version: "v1", Kind: "Thing"}}
	cmKey := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	active := func(r *replica) []string {
		var on []string
		for _, k := range []cache.Key{thingKey, cmKey} {
			for _, meta := range []bool{false, true} {
				k.MetadataOnly = meta
				if informerOf(r.mgr.GetCache(), k) {
					on = append(on, k.String())
				}
			}
		}
		return on
	}
	// v1 -> v3 (watches ConfigMaps too) -> v1 -> v3, on both replicas.
	for i, v := range []string{"swap-v3", "swap-v1", "swap-v3"} {
		patch := fmt.Appendf(nil, `{"spec":{"module":%q}}`, filepath.Join(dir, v+".wasm"))
		_, err := dyn(t).Resource(pluginGVR).Patch(ctx, "released", types.MergePatchType, patch, metav1.PatchOptions{})
		must(t, err)
		for name, r := range map[string]*replica{"a": a, "b": b} {
			eventually(t, 30*time.Second, fmt.Sprintf("swap %d to %s on %s", i+1, v, name), func() error {
				// the swaps to v so far: 1, 1, 2
				if lines, _ := r.logs.matching("swapped the module", `"to"="`+wasm.ShortDigest(digestOf(module2(t, v)))+`"`); len(lines) < (i+2)/2 {
					return errors.New("not swapped yet")
				}
				return nil
			})
		}
	}
	eventually(t, 30*time.Second, "the follower's ConfigMap informer warm", func() error {
		if !slices.Contains(active(b), cmKey.String()) {
			return fmt.Errorf("b has %v", active(b))
		}
		return nil
	})
	if lines, _ := b.logs.matching("reconciled a n="); len(lines) > 0 || b.isLeader() {
		t.Fatalf("the follower reconciled (leader %v): %q", b.isLeader(), lines)
	}

	must(t, dyn(t).Resource(pluginGVR).Delete(ctx, "released", metav1.DeleteOptions{}))
	for name, r := range map[string]*replica{"a": a, "b": b} {
		eventually(t, 30*time.Second, "every informer of the deleted plugin released on "+name, func() error {
			if on := active(r); len(on) > 0 {
				return fmt.Errorf("still active: %v", on)
			}
			return nil
		})
	}
}
