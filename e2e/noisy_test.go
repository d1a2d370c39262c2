package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

// BenchmarkNoisyNeighbour runs a host process with its shipped defaults and another team's
// plugin reconciling 50 ConfigMaps touched every 200 ms, first on a quiet host, then while a
// tenant does the worst her default bounds allow: 16 Plugins of 8 workers each whose guests
// loop on every reconcile, one failing with 64 KiB errors and sending Events past their bounds,
// one of a module at the size bound, and Plugins of 8 shards up to her namespace's unit budget.
// It reports the neighbour's reconcile and queue-wait p99 (from the host's histograms) in each
// phase and their ratio, the host's peak RSS in each, and the bytes of host log the tenant's
// plugins caused against what her logLimit allows. The host must stay up.
func BenchmarkNoisyNeighbour(b *testing.B) {
	ctx := context.Background()
	installPluginCRD(b)
	cs := kubernetes.NewForConfigOrDie(cfg)
	dir := b.TempDir()
	writeModule(b, filepath.Join(dir, "misbehave.wasm"), module2(b, "misbehave"))
	writeModule(b, filepath.Join(dir, "flood.wasm"), module2(b, "flood"))
	writeModule(b, filepath.Join(dir, "big.wasm"), largeModule(b, 32<<20-4096)) // just under pluginObjects.maxModuleSize's default
	config := fmt.Sprintf("plugins: []\npluginObjects:\n  sources: [%q]\n", dir)
	for b.Loop() {
		neighbour, tenant := namespace(b), namespace(b)
		h := startHost(b, config, "--metrics-bind-address", "127.0.0.1:0", "--log-format", "json")
		h.waitOut(b, metricsJSONPrefix)
		_, rest, _ := strings.Cut(h.out.String(), metricsJSONPrefix)
		addr, _, _ := strings.Cut(rest, `"`)
		metricsURL := addr + "/metrics"

		steady := admitted(b, neighbour, "bob", "steady", map[string]any{"module": filepath.Join(dir, "misbehave.wasm"), "maxConcurrentReconciles": int64(2)},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
		ready(b, neighbour, steady, 2*time.Minute)
		const objects = 50
		for i := range objects {
			_, err := cs.CoreV1().ConfigMaps(neighbour).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i),
				Labels: map[string]string{"wasmrec.dev/misbehave": "", "round": "0"}}}, metav1.CreateOptions{})
			must(b, err)
		}
		plugin := neighbour + "." + steady
		phase := func(name string, d time.Duration) (reconcileP99, waitP99 time.Duration, reconciles float64, peak float64) {
			before := histograms(b, metricsURL, plugin)
			cpuBefore := cpuSeconds(b, h.cmd.Process.Pid)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the neighbour's work: every ConfigMap touched every 200 ms
				defer wg.Done()
				for round := 1; ; round++ {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
					for i := range objects {
						_, _ = cs.CoreV1().ConfigMaps(neighbour).Patch(ctx, fmt.Sprint("cm-", i), types.MergePatchType,
							[]byte(fmt.Sprintf(`{"metadata":{"labels":{"round":"%d"}}}`, round)), metav1.PatchOptions{})
					}
				}
			}()
			time.Sleep(d)
			close(stop)
			wg.Wait()
			after := histograms(b, metricsURL, plugin)
			reconcileP99 = after.reconcile.minus(before.reconcile).quantile(0.99)
			waitP99 = after.wait.minus(before.wait).quantile(0.99)
			reconciles = after.reconcile.count - before.reconcile.count
			peak = peakResidentMiB(b, h.cmd.Process.Pid)
			cores := (cpuSeconds(b, h.cmd.Process.Pid) - cpuBefore) / d.Seconds()
			fmt.Fprintf(os.Stderr, "e2e: %s: the neighbour's reconcile p99 %s, queue-wait p99 %s, %.0f reconciles in %s; host CPU %.2f cores, peak RSS %.0f MiB\n",
				name, reconcileP99, waitP99, reconciles, d, cores, peak)
			b.ReportMetric(cores, "cores-"+name)
			return
		}
		quietReconcile, quietWait, quietN, quietPeak := phase("quiet", 20*time.Second)

		// The tenant at her bounds.
		logMark := len(h.out.String())
		noisyStart := time.Now()
		rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}
		var names []string
		for i := range 16 {
			names = append(names, admitted(b, tenant, "alice", fmt.Sprint("loop-", i), map[string]any{"module": filepath.Join(dir, "misbehave.wasm"),
				"maxConcurrentReconciles": int64(8), "memoryLimit": "2Mi"}, rule)) // 256Mi of her 1Gi budget: the big module compiling takes 576Mi
		}
		for i := range 5 { // 8 units each with --share-plugins (58 of her 64 with the others); one each here, run whole
			names = append(names, admitted(b, tenant, "alice", fmt.Sprint("shards-", i), map[string]any{"module": filepath.Join(dir, "misbehave.wasm"),
				"shards": int64(8), "memoryLimit": "1Mi"}, rule))
		}
		names = append(names, admitted(b, tenant, "alice", "big", map[string]any{"module": filepath.Join(dir, "big.wasm"), "memoryLimit": "1Mi", // the tenant guest, padded
			"permissions": []any{map[string]any{"group": "", "resources": []any{"*"}, "verbs": []any{"get", "list", "watch"}}}}, rule))
		names = append(names, admitted(b, tenant, "alice", "flood", map[string]any{"module": filepath.Join(dir, "flood.wasm"), "memoryLimit": "1Mi",
			"permissions": []any{
				map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch"}},
				map[string]any{"group": "", "resources": []any{"events"}, "verbs": []any{"create"}},
			}}, rule, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}))
		for i := range 8 { // "loop" loops in each of her 16 loop Plugins; the flood Plugin floods on the rest
			names := []string{fmt.Sprint("event.", 4096+i), fmt.Sprint("fail.", 65536-i)}
			if i == 0 {
				names = append(names, "loop")
			}
			for _, name := range names {
				labels := map[string]string{"wasmrec.dev/misbehave": "", "wasmrec.dev/flood": ""}
				_, err := cs.CoreV1().ConfigMaps(tenant).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
				must(b, err)
			}
		}
		time.Sleep(10 * time.Second) // her plugins load and start looping
		loaded, notLoaded := 0, []string{}
		for _, name := range names {
			if st, _ := pluginCondition(b, tenant, name, "Ready"); st == "True" {
				loaded++
			} else {
				_, why := pluginCondition(b, tenant, name, "Degraded")
				notLoaded = append(notLoaded, name+": "+why)
			}
		}
		fmt.Fprintf(os.Stderr, "e2e: noisy: %d of her %d Plugins loaded; not: %q\n", loaded, len(names), notLoaded)
		noisyReconcile, noisyWait, noisyN, noisyPeak := phase("noisy", 20*time.Second)
		noisyFor := time.Since(noisyStart)
		if h.cmd.ProcessState != nil {
			b.Fatalf("the host stopped:\n%s", tail(h.out.String(), 40))
		}
		var tenantLog int
		for _, line := range strings.Split(h.out.String()[logMark:], "\n") {
			if strings.Contains(line, `"plugin":"`+tenant+".") {
				tenantLog += len(line) + 1
			}
		}
		// Her logLimit: 1 MiB/s for each plugin (the default), for as long as she was noisy.
		allowed := float64(len(names)) * float64(1<<20) * noisyFor.Seconds()
		b.ReportMetric(ratio(noisyReconcile, quietReconcile), "x-neighbour-reconcile-p99")
		b.ReportMetric(float64(quietWait)/1e6, "ms-neighbour-queue-wait-p99-quiet")
		b.ReportMetric(float64(noisyWait)/1e6, "ms-neighbour-queue-wait-p99-noisy")
		b.ReportMetric(noisyN/math.Max(quietN, 1), "x-neighbour-reconciles")
		b.ReportMetric(quietPeak, "MiB-peak-quiet")
		b.ReportMetric(noisyPeak, "MiB-peak-noisy")
		b.ReportMetric(float64(tenantLog)/(1<<10), "KiB-tenant-log")
		b.ReportMetric(float64(tenantLog)/allowed, "tenant-log/logLimit")
		for _, ns := range []string{tenant, neighbour} {
			_ = dyn(b).Resource(pluginobjects.GVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		h.terminate(b)
	}
}

func ratio(a, b time.Duration) float64 {
	return float64(a) / math.Max(float64(b), float64(time.Millisecond))
}

// cpuSeconds reads a process's user and system CPU time from /proc/PID/stat.
func cpuSeconds(t testing.TB, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:])) // after "(comm) "
	utime, err := strconv.ParseFloat(f[11], 64)
	must(t, err)
	stime, err := strconv.ParseFloat(f[12], 64)
	must(t, err)
	return (utime + stime) / 100 // clock ticks: USER_HZ is 100 on Linux
}

// admitted creates a Plugin in ns as a tenant of that namespace who may impersonate its
// ServiceAccount (made with rules), granting what the guest asks (spec["permissions"], or
// ConfigMap reads), and returns its name.
func admitted(b testing.TB, ns, who, name string, spec map[string]any, rules ...rbacv1.PolicyRule) string {
	b.Helper()
	sa := "sa-" + name
	tn := newTenant(b, who+"-"+ns+"-"+name, ns, sa)
	// She may record Events herself, so that she may grant it.
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.RbacV1().Roles(ns).Create(context.Background(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: tn.name + "-events"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{})
	must(b, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tn.name + "-events"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: tn.name}}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: tn.name + "-events"}}, metav1.CreateOptions{})
	must(b, err)
	serviceAccount(b, ns, sa, rules...)
	spec["serviceAccountName"] = sa
	if _, ok := spec["permissions"]; !ok {
		spec["permissions"] = []any{map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch"}}}
	}
	eventually(b, 30*time.Second, "Plugin "+ns+"/"+name+" admitted", func() error { return tn.plugin(name, spec) })
	return name
}

// histogram is a Prometheus histogram read from /metrics: cumulative counts by upper bound.
type histogram struct {
	bounds []float64
	counts []float64
	count  float64
}

type neighbourHistograms struct{ reconcile, wait histogram }

func histograms(t testing.TB, url, plugin string) neighbourHistograms {
	read := func(metric, label string) histogram {
		var h histogram
		for _, s := range samples(t, url, metric+"_bucket") {
			if s.labels[label] != plugin {
				continue
			}
			le := s.labels["le"]
			bound := math.Inf(1)
			if le != "+Inf" {
				bound, _ = strconv.ParseFloat(le, 64)
			}
			h.bounds = append(h.bounds, bound)
			h.counts = append(h.counts, s.value)
		}
		idx := make([]int, len(h.bounds))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return h.bounds[idx[a]] < h.bounds[idx[b]] })
		var sorted histogram
		for _, i := range idx {
			sorted.bounds = append(sorted.bounds, h.bounds[i])
			sorted.counts = append(sorted.counts, h.counts[i])
		}
		if n := len(sorted.counts); n > 0 {
			sorted.count = sorted.counts[n-1]
		}
		return sorted
	}
	return neighbourHistograms{
		reconcile: read("controller_runtime_reconcile_time_seconds", "controller"),
		wait:      read("workqueue_queue_duration_seconds", "name"),
	}
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), count: h.count - o.count}
	for i := range h.counts {
		out.counts[i] = h.counts[i]
		if i < len(o.counts) {
			out.counts[i] -= o.counts[i]
		}
	}
	return out
}

// quantile is the upper bound of the bucket that holds quantile q.
func (h histogram) quantile(q float64) time.Duration {
	if h.count <= 0 {
		return 0
	}
	for i, c := range h.counts {
		if c >= q*h.count {
			if math.IsInf(h.bounds[i], 1) && i > 0 {
				return time.Duration(h.bounds[i-1] * float64(time.Second))
			}
			return time.Duration(h.bounds[i] * float64(time.Second))
		}
	}
	return 0
}
