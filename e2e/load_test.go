package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/object"
)

// BenchmarkConfigMapHash runs one reconcile four ways on the same API server and compares them:
// for every ConfigMap of a namespace, merge-patch the annotation bench/hash to the FNV-64a of
// its sorted data. "cr" is a controller-runtime controller (e2e/testdata/crhash: its default
// options, 2 workers); "c" and "go" are wasmrec plugins (hashc, hash-go: wasmrec's default
// settings, 2 workers), and "go-typed" is crhash's reconcile ported to the generated types and
// package client (hashtyped-go). Each run starts the controller on n fresh ConfigMaps and
// measures, from its start: the first ConfigMap with its hash ("first"), every ConfigMap with
// its hash ("converge"), its peak RSS (VmHWM, read before it is stopped) and of it the peak
// private memory (samplePrivate), and, once it has exited on SIGTERM, its CPU time.
//
// Each plugin runs side by side with its own run of controller-runtime, on a namespace each,
// round after round (hashRunTogether): one run of either moves by a quarter from one moment of
// the machine to the next, the two of a pair together by a few percent. The "-x" figures are
// the medians of each pair's ratios; the absolute figures are medians of the runs.
func BenchmarkConfigMapHash(b *testing.B) {
	crhash := filepath.Join(b.TempDir(), "crhash")
	build := exec.Command("go", "build", "-o", crhash, "./testdata/crhash")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building crhash: %v\n%s", err, out)
	}
	cr := hashImpl{name: "cr", start: func(b *testing.B, ns string) *exec.Cmd { return startCRHash(b, crhash, ns) }}
	plugins := []hashImpl{
		{name: "c", start: func(b *testing.B, ns string) *exec.Cmd { return startHashPlugin(b, "hashc", ns) }},
		{name: "go", start: func(b *testing.B, ns string) *exec.Cmd { return startHashPlugin(b, "hash-go", ns) }},
		{name: "go-typed", start: func(b *testing.B, ns string) *exec.Cmd { return startHashPlugin(b, "hashtyped-go", ns) }},
	}
	// A first, small run of each: modules compiled into the default cache, binaries in the page
	// cache. Users run on a warm cache after their first start.
	hashRunTogether(b, append([]hashImpl{cr}, plugins...), 20)
	for _, size := range hashSizes {
		n := size.n
		b.Run(fmt.Sprintf("configmaps=%d", n), func(b *testing.B) {
			runs := map[string][]hashFigures{}
			ratios := map[string][][5]float64{}
			for b.Loop() {
				for range size.rounds {
					for _, impl := range plugins {
						pair := hashRunTogether(b, []hashImpl{cr, impl}, n)
						c, f := pair[0], pair[1]
						runs["cr"] = append(runs["cr"], c)
						runs[impl.name] = append(runs[impl.name], f)
						ratios[impl.name] = append(ratios[impl.name], [5]float64{f.first.Seconds() / c.first.Seconds(), f.converge.Seconds() / c.converge.Seconds(), f.cpu.Seconds() / c.cpu.Seconds(), f.rssMiB / c.rssMiB, f.privateMiB / c.privateMiB})
					}
				}
			}
			c := median(runs["cr"])
			b.ReportMetric(c.converge.Seconds(), "cr-converge-s")
			b.ReportMetric(c.cpu.Seconds(), "cr-cpu-s")
			b.ReportMetric(c.rssMiB, "cr-rss-MiB")
			b.ReportMetric(c.privateMiB, "cr-private-MiB")
			fmt.Fprintf(os.Stderr, "\n%d ConfigMaps, each plugin beside controller-runtime (%d pairs each)\n                 first     converge  CPU       peak RSS, private\n", n, len(runs["cr"])/len(plugins))
			for _, impl := range append([]hashImpl{cr}, plugins...) {
				f := median(runs[impl.name])
				fmt.Fprintf(os.Stderr, "  %-14s %-9s %-9s %-9s %.0f, %.0f MiB", impl.name, f.first.Round(time.Millisecond), f.converge.Round(time.Millisecond), f.cpu.Round(time.Millisecond), f.rssMiB, f.privateMiB)
				if impl.name != "cr" {
					var r [5]float64
					for i := range r {
						r[i] = medianOf(ratios[impl.name], func(x [5]float64) float64 { return x[i] })
					}
					fmt.Fprintf(os.Stderr, "   (x cr: first %.2f, converge %.2f, CPU %.2f, RSS %.2f, private %.2f; CPU of each pair %s)", r[0], r[1], r[2], r[3], r[4], pairRatios(ratios[impl.name], 2))
					for i, what := range []string{"first", "converge", "cpu", "rss", "private"} {
						b.ReportMetric(r[i], impl.name+"-"+what+"-x")
					}
				}
				fmt.Fprintln(os.Stderr)
			}
		})
	}
}

// pairRatios lists the i-th ratio of each pair, for the spread behind a median.
func pairRatios(rs [][5]float64, i int) string {
	s := make([]string, len(rs))
	for j, r := range rs {
		s[j] = strconv.FormatFloat(r[i], 'f', 2, 64)
	}
	return strings.Join(s, " ")
}

// hashSizes are the namespace sizes of BenchmarkConfigMapHash, and how many rounds (a pair of
// each plugin with controller-runtime) each gets.
var hashSizes = []struct{ n, rounds int }{{2000, 3}, {10000, 3}}

type hashImpl struct {
	name  string
	start func(b *testing.B, ns string) *exec.Cmd
}

type hashFigures struct {
	first, converge, cpu time.Duration
	rssMiB, privateMiB   float64
}

// medianOf is the median of get over xs.
func medianOf[T any](xs []T, get func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = get(x)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// median takes each figure's median over the runs.
func median(fs []hashFigures) hashFigures {
	pick := func(get func(hashFigures) float64) float64 { return medianOf(fs, get) }
	return hashFigures{
		first:      time.Duration(pick(func(f hashFigures) float64 { return float64(f.first) })),
		converge:   time.Duration(pick(func(f hashFigures) float64 { return float64(f.converge) })),
		cpu:        time.Duration(pick(func(f hashFigures) float64 { return float64(f.cpu) })),
		rssMiB:     pick(func(f hashFigures) float64 { return f.rssMiB }),
		privateMiB: pick(func(f hashFigures) float64 { return f.privateMiB }),
	}
}

// hashRunTogether runs impls at once, each on a new namespace of n ConfigMaps, and measures
// each until every ConfigMap of its namespace holds its hash; then it stops it and deletes the
// ConfigMaps. Started together, they share the API server and the machine as they run, so that
// a difference between them is not a difference between two moments of the machine.
func hashRunTogether(b *testing.B, impls []hashImpl, n int) []hashFigures {
	b.Helper()
	cs := benchClient(b)
	type run struct {
		name string
		ns   string
		want map[string]string
		w    watch.Interface
		cmd  *exec.Cmd
		f    hashFigures
		err  error
	}
	runs := make([]*run, len(impls))
	for i, impl := range impls {
		r := &run{name: impl.name, ns: namespace(b)}
		r.want = createHashConfigMaps(b, cs, r.ns, n)
		// The benchmark watches metadata only: the API server encodes that for it alone, whatever
		// encoding the controller under test asks for.
		md := metadata.NewForConfigOrDie(benchConfig()).Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(r.ns)
		list, err := md.List(context.Background(), metav1.ListOptions{Limit: 1})
		must(b, err)
		r.w, err = md.Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		must(b, err)
		defer r.w.Stop()
		runs[i] = r
	}
	var wg sync.WaitGroup
	for i, r := range runs {
		began := time.Now()
		r.cmd = impls[i].start(b, r.ns)
		private := samplePrivate(r.cmd.Process.Pid)
		wg.Go(func() {
			r.f, r.err = waitForHashes(r.w, r.cmd, r.want, began, private)
			if r.err != nil {
				r.err = fmt.Errorf("%s on %d ConfigMaps: %w", r.name, n, r.err)
			}
		})
	}
	wg.Wait()
	figures := make([]hashFigures, len(runs))
	for i, r := range runs {
		if r.err != nil {
			b.Fatal(r.err)
		}
		figures[i] = r.f
		deleteConfigMaps(b, cs, r.ns)
	}
	return figures
}

// waitForHashes waits until every ConfigMap of want holds its hash, then reads cmd's peak RSS,
// stops it and reads its CPU time.
func waitForHashes(w watch.Interface, cmd *exec.Cmd, want map[string]string, began time.Time, private func() float64) (hashFigures, error) {
	var f hashFigures
	done := map[string]bool{}
	timeout := time.After(10 * time.Minute)
	for len(done) < len(want) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				_ = cmd.Process.Kill()
				return f, errors.New("the watch ended")
			}
			if ev.Type == watch.Error {
				_ = cmd.Process.Kill()
				return f, fmt.Errorf("watch error %v", ev.Object)
			}
			cm, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok || ev.Type == watch.Deleted || cm.Annotations["bench/hash"] != want[cm.Name] {
				continue
			}
			if len(done) == 0 {
				f.first = time.Since(began)
			}
			done[cm.Name] = true
		case <-timeout:
			_ = cmd.Process.Kill()
			return f, fmt.Errorf("%d converged after 10 minutes", len(done))
		}
	}
	f.converge = time.Since(began)
	rss, err := readProcStatusMiB(cmd.Process.Pid, "VmHWM")
	if err != nil {
		_ = cmd.Process.Kill()
		return f, err
	}
	f.rssMiB, f.privateMiB = rss, private()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return f, err
	}
	if err := cmd.Wait(); err != nil {
		return f, fmt.Errorf("exited with %v:\n%s", err, tail(cmd.Stdout.(*lockedBuffer).String(), 30))
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	f.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return f, nil
}

// deleteConfigMaps deletes every ConfigMap of ns. A delete of tens of thousands runs past the API
// server's request timeout and goes on behind it: wait until the namespace is empty.
func deleteConfigMaps(b *testing.B, cs *kubernetes.Clientset, ns string) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := cs.CoreV1().ConfigMaps(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil && !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) {
			b.Fatal(err)
		}
		left, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{Limit: 1})
		must(b, err)
		if len(left.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("ConfigMaps of %s still there after 5 minutes of deleting", ns)
		}
		time.Sleep(time.Second)
	}
}

// benchClient is a client for the benchmark's own writes: protobuf, and fast enough not to be
// what is measured.
func benchClient(b testing.TB) *kubernetes.Clientset {
	c := benchConfig()
	c.ContentType = "application/vnd.kubernetes.protobuf"
	return kubernetes.NewForConfigOrDie(c)
}

func benchConfig() *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return c
}

// createHashConfigMaps creates n ConfigMaps of five keys each in ns and returns their hashes.
func createHashConfigMaps(b testing.TB, cs *kubernetes.Clientset, ns string, n int) map[string]string {
	b.Helper()
	want := make(map[string]string, n)
	var mu sync.Mutex
	createConfigMaps(b, cs, n, metav1.CreateOptions{}, func(i int) *corev1.ConfigMap {
		cm := benchConfigMap(ns, i)
		mu.Lock()
		want[cm.Name] = hashData(cm.Data)
		mu.Unlock()
		return cm
	})
	return want
}

// benchConfigMap is the i-th ConfigMap of the benchmarks: five keys of data of growing sizes.
func benchConfigMap(ns string, i int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: ns},
		Data:       map[string]string{},
	}
	for k := range 5 {
		cm.Data[fmt.Sprintf("key-%d", k)] = strings.Repeat(strconv.Itoa(i*7+k), 1+k*4)
	}
	return cm
}

// createConfigMaps creates the ConfigMaps build gives for 0..n-1, 16 at a time.
func createConfigMaps(b testing.TB, cs *kubernetes.Clientset, n int, opts metav1.CreateOptions, build func(i int) *corev1.ConfigMap) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				cm := build(i)
				if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, opts); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// hashData is what the reconcilers compute: FNV-64a over key=value\n in key order, in hex.
func hashData(data map[string]string) string {
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%s=%s\n", k, data[k])
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

func startCRHash(b *testing.B, bin, ns string) *exec.Cmd {
	b.Helper()
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	must(b, os.WriteFile(kubeconfig, cp.Kubeconfig, 0o600))
	cmd := exec.Command(bin, "--namespace", ns)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	return startBenchProcess(b, cmd)
}

// startHashPlugin runs `wasmrec run` with one plugin as a user writes it: a module, its namespace,
// its grant, 2 workers, and nothing else.
func startHashPlugin(b testing.TB, guest, ns string) *exec.Cmd {
	return startHashPluginWith(b, guest, ns, "")
}

// startHashPluginWith is startHashPlugin with more settings for the plugin (YAML lines of its
// entry) and more flags for the host.
func startHashPluginWith(b testing.TB, guest, ns, settings string, args ...string) *exec.Cmd {
	b.Helper()
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(b, os.WriteFile(kubeconfig, cp.Kubeconfig, 0o600))
	config := fmt.Sprintf(`plugins:
  - name: %s
    module: %s
    namespaces: [%s]
    maxConcurrentReconciles: 2
    permissions:
      - {resources: [configmaps], verbs: [get, list, watch, patch]}
%s`, guest, wasmFile(b, "testguests", guest), ns, settings)
	must(b, os.WriteFile(filepath.Join(dir, "host.yaml"), []byte(config), 0o600))
	bin, err := filepath.Abs("../bin/wasmrec")
	must(b, err)
	return startBenchProcess(b, exec.Command(bin, append([]string{"run", "--config", filepath.Join(dir, "host.yaml"), "--kubeconfig", kubeconfig}, args...)...))
}

func startBenchProcess(b testing.TB, cmd *exec.Cmd) *exec.Cmd {
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	must(b, cmd.Start())
	b.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// BenchmarkInformerMemory measures what an informer holds per cached ConfigMap, on 50000
// ConfigMaps as `kubectl apply` leaves them (managedFields and the last-applied annotation):
// wasmrec's cache against controller-runtime's default cache, in the same process, one after
// the other. The figure is the live heap an informer adds once synced, divided by the objects.
func BenchmarkInformerMemory(b *testing.B) {
	const n = 50000
	ns := namespace(b)
	cs := benchClient(b)
	fmt.Fprintf(os.Stderr, "e2e: creating %d ConfigMaps as kubectl apply leaves them\n", n)
	createAppliedConfigMaps(b, cs, ns, n)
	defer deleteConfigMaps(b, cs, ns)
	c := benchConfig()
	for _, impl := range []struct {
		name string
		run  func(ctx context.Context) error // starts an informer on ConfigMaps and waits until it has synced
	}{
		{"wasmrec", func(ctx context.Context) error {
			cc, err := cache.New(c, cache.Options{})
			if err != nil {
				return err
			}
			go func() { _ = cc.Start(ctx) }()
			inf, err := cc.Acquire(cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap")})
			if err != nil {
				return err
			}
			return inf.WaitForSync(ctx)
		}},
		{"controller-runtime", func(ctx context.Context) error {
			cc, err := crcache.New(c, crcache.Options{})
			if err != nil {
				return err
			}
			if _, err := cc.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
				return err
			}
			go func() { _ = cc.Start(ctx) }()
			if !cc.WaitForCacheSync(ctx) {
				return fmt.Errorf("controller-runtime's cache did not sync")
			}
			return nil
		}},
	} {
		b.Run(impl.name, func(b *testing.B) {
			var perObject float64
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				before := liveHeap()
				must(b, impl.run(ctx))
				perObject = float64(liveHeap()-before) / n
				cancel()
			}
			b.ReportMetric(perObject, "B/object")
			fmt.Fprintf(os.Stderr, "informer memory, %s: %.0f bytes per ConfigMap\n", impl.name, perObject)
		})
	}
}

// createAppliedConfigMaps creates n ConfigMaps in ns the way `kubectl apply` does: with the
// last-applied annotation and kubectl's field manager.
func createAppliedConfigMaps(b testing.TB, cs *kubernetes.Clientset, ns string, n int) {
	b.Helper()
	createConfigMaps(b, cs, n, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}, func(i int) *corev1.ConfigMap {
		cm := benchConfigMap(ns, i)
		cm.Labels = map[string]string{"app.kubernetes.io/name": "bench"}
		applied, _ := json.Marshal(cm) // a ConfigMap always encodes
		cm.Annotations = map[string]string{object.LastApplied: string(applied) + "\n"}
		return cm
	})
}

// liveHeap is the live heap after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
