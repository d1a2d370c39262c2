package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controlplane"
	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

var (
	cp  *controlplane.ControlPlane
	cfg *rest.Config

	widgetGVK = schema.GroupVersionKind{Group: "e2e.wasmrec.dev", Version: "v1", Kind: "Widget"}
	widgetGVR = schema.GroupVersionResource{Group: "e2e.wasmrec.dev", Version: "v1", Resource: "widgets"}
	widgetKey = cache.Key{GroupVersionKind: widgetGVK}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	defer removeInstalled()
	// envtest logs through controller-runtime's logger; a control plane started later than 30 s
	// into the run (TestShardedPluginWithoutTheGate's) would otherwise print a stack about it.
	ctrllog.SetLogger(logr.Discard())
	if _, err := controlplane.FindBinDir(""); err != nil && !testenv.Required() {
		fmt.Fprintf(os.Stderr, "e2e: skipped, no local control plane: %v: run `make controlplane`, or `make test`, which runs everything\n", err)
		return 0
	}
	fmt.Fprintln(os.Stderr, "e2e: starting etcd and kube-apiserver from bin/")
	cp, err = controlplane.Start(controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
		}
	}()
	cfg = rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 200, 400 // tests create objects quickly; the client's default 5 qps would pace them

	crds, err := crd.Read("testdata/widgets.yaml")
	if err == nil {
		err = crd.Install(context.Background(), cfg, crds, 0)
	}
	if err == nil {
		err = demo.InstallCRD(context.Background(), cfg)
	}
	if err == nil {
		err = pluginobjects.Install(context.Background(), cfg) // the Plugin CRDs and their admission policy
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// startManager starts a manager on the control plane and stops it when the test ends, failing
// the test if Start returned an error.
func startManager(t *testing.T, opts manager.Options) *manager.Manager {
	t.Helper()
	return startManagerWith(t, cfg, opts)
}

// startManagerWith is startManager with another client config.
func startManagerWith(t *testing.T, restCfg *rest.Config, opts manager.Options) *manager.Manager {
	t.Helper()
	if opts.GracefulShutdownTimeout == nil {
		d := 10 * time.Second
		opts.GracefulShutdownTimeout = &d
	}
	m, err := manager.New(restCfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	select {
	case <-m.Elected():
	case err := <-done:
		t.Fatalf("manager stopped at start: %v", err)
	}
	return m
}

var nsSeq atomic.Int32

// namespace creates a namespace for one test.
func namespace(t testing.TB) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	name := fmt.Sprintf("e2e-%d-%d", os.Getpid()%10000, nsSeq.Add(1))
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func dyn(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func createWidget(t *testing.T, ns, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetGVK.GroupVersion().String(),
		"kind":       widgetGVK.Kind,
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
	got, err := dyn(t).Resource(widgetGVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// recorder collects what reconcilers saw, for tests to wait on.
type recorder[T any] struct {
	mu   sync.Mutex
	seen []T
	more chan struct{}
}

func newRecorder[T any]() *recorder[T] { return &recorder[T]{more: make(chan struct{}, 1)} }

func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	r.seen = append(r.seen, v)
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

func (r *recorder[T]) snapshot() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.seen...)
}

// waitUntil waits until cond holds for what was seen, or fails after timeout.
func (r *recorder[T]) waitUntil(t *testing.T, what string, timeout time.Duration, cond func([]T) bool) []T {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s := r.snapshot()
		if cond(s) {
			return s
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s; saw %v", timeout, what, s)
		}
	}
}

func managerOptions() manager.Options { return manager.Options{} }
