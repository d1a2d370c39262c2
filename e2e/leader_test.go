package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin"
)

// replica is one host of a leader-elected pair.
type replica struct {
	mgr     *manager.Manager
	metrics *metrics.Metrics
	stop    context.CancelFunc
	done    chan error
}

func startReplica(t *testing.T, ns, identity string, release bool) *replica {
	t.Helper()
	le := &manager.LeaderElection{Namespace: ns, Name: "wasmrec-e2e", Identity: identity,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond, ReleaseOnCancel: ptr.To(release)}
	mgr, err := manager.New(cfg, manager.Options{LeaderElection: le, Logger: logr.Discard()})
	must(t, err)
	r := &replica{mgr: mgr, metrics: metrics.New(), done: make(chan error, 1)}
	host, err := plugin.NewHost(mgr, sharedEngine(t), r.metrics, logr.Discard())
	must(t, err)
	t.Cleanup(host.Close)
	p, err := host.LoadFile(context.Background(), plugin.Config{Name: "misbehave", Module: wasmFile(t, "testguests", "misbehave"),
		Namespaces: []string{ns}, Permissions: []abi.Permission{grant("", []string{"configmaps"}, "get", "list", "watch")}})
	must(t, err)
	must(t, host.Run(p))
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done; p.Close(context.Background()) })
	return r
}

func (r *replica) reconciled(t *testing.T) float64 {
	v, _ := value(t, r.metrics, "controller_runtime_reconcile_total", map[string]string{"controller": "misbehave", "result": "success"})
	return v
}

func (r *replica) isLeader() bool {
	select {
	case <-r.mgr.Elected():
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
	cs := kubernetes.NewForConfigOrDie(cfg)
	create := func(name string) {
		t.Helper()
		_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"wasmrec.dev/misbehave": "yes"}}}, metav1.CreateOptions{})
		must(t, err)
	}
	a := startReplica(t, ns, "a", false) // dies without releasing, like a crashed process
	eventually(t, 30*time.Second, "a becoming the leader", func() error {
		if !a.isLeader() {
			return errors.New("not yet")
		}
		return nil
	})
	b := startReplica(t, ns, "b", true)
	cmKey := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	eventually(t, 30*time.Second, "the follower's informers warm", func() error {
		if !b.mgr.GetCache().Active(cmKey) {
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
