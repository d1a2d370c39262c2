package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// density is a host config of n plugins built from one module, one per team as an operator
// would run them, each watching ns.
func density(module, ns string, n int, rules string) (config string, names []string) {
	var b strings.Builder
	b.WriteString("plugins:\n")
	for i := range n {
		name := fmt.Sprintf("team-%03d", i)
		names = append(names, name)
		fmt.Fprintf(&b, "  - name: %s\n    module: %s\n    namespaces: [%s]\n    permissions:\n      - %s\n", name, module, ns, rules)
	}
	return b.String(), names
}

var metricsAddrRE = regexp.MustCompile(`msg="serving metrics" address=(https?://\S+)`)

// reconciledAll waits until every one of names has reconciled successfully, by the host's
// metrics.
func (h *hostProcess) reconciledAll(t testing.TB, names []string, timeout time.Duration) {
	t.Helper()
	h.waitOut(t, `msg="serving metrics"`)
	addr := metricsAddrRE.FindStringSubmatch(h.out.String())[1]
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-h.exited:
			t.Fatalf("the host exited (%v) before every plugin reconciled:\n%s", err, tail(h.out.String(), 40))
		default:
		}
		done := successes(t, addr+"/metrics")
		var missing []string
		for _, n := range names {
			if done[n] == 0 {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d plugins have not reconciled (%s...):\n%s", timeout, len(missing), len(names), missing[0], tail(h.out.String(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// successes reads controller_runtime_reconcile_total{result="success"} per controller.
func successes(t testing.TB, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "controller_runtime_reconcile_total{") || !strings.Contains(line, `result="success"`) {
			continue
		}
		_, rest, _ := strings.Cut(line, `controller="`)
		name, _, _ := strings.Cut(rest, `"`)
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		must(t, err)
		out[name] = v
	}
	must(t, sc.Err())
	_, _ = io.Copy(io.Discard, resp.Body)
	return out
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// deploymentsRule grants what the bench guests (C and Go) need.
const deploymentsRule = `{group: apps, resources: [deployments], verbs: [get, list, watch]}`

// oneDeployment creates a namespace with one Deployment in it, for the bench guests to reconcile.
func oneDeployment(t testing.TB) (ns string) {
	t.Helper()
	ns = namespace(t)
	_, err := kubernetes.NewForConfigOrDie(cfg).AppsV1().Deployments(ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "one"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "one"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "one"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	return ns
}

// A host that runs many plugins built from one module starts cleanly every time on a warm
// compilation cache, and every plugin reconciles. wazero v1.12.0 panicked in about one start
// of ten with 100 such plugins (wazero issue #2547); 200 plugins each opening an inotify
// instance went past the kernel's limit of 128.
func TestManyPluginsShareOneModule(t *testing.T) {
	const plugins, starts = 200, 20
	ns := oneDeployment(t)
	config, names := density(wasmFile(t, "testguests", "benchc"), ns, plugins, deploymentsRule)
	args := []string{"--compilation-cache", t.TempDir(), "--metrics-bind-address", "127.0.0.1:0"}

	warm := startHost(t, config, args...)
	warm.reconciledAll(t, names, 2*time.Minute)
	warm.terminate(t)
	fmt.Fprintf(os.Stderr, "e2e: starting a host with %d plugins of one module %d times on a warm compilation cache\n", plugins, starts)
	var took []time.Duration
	for i := range starts {
		began := time.Now()
		h := startHost(t, config, args...)
		h.reconciledAll(t, names, time.Minute)
		took = append(took, time.Since(began).Round(time.Millisecond))
		h.terminate(t)
		if out := h.out.String(); strings.Contains(out, "panic") || strings.Contains(out, "level=ERROR") {
			t.Fatalf("start %d of %d:\n%s", i+1, starts, out)
		}
	}
	t.Logf("%d starts of %d plugins, each until every plugin had reconciled: %v", starts, plugins, took)
}

// BenchmarkHostRSS measures a host process's resident memory with n plugins built from one
// module, once every plugin has reconciled, and what each plugin past the first adds.
func BenchmarkHostRSS(b *testing.B) {
	ns := oneDeployment(b)
	cache := b.TempDir()
	for _, c := range []struct {
		lang, module, rules string
		counts              []int
	}{
		{"c", wasmFile(b, "testguests", "benchc"), deploymentsRule, []int{1, 10, 50, 100, 200}},
		{"go", wasmFile(b, "testguests", "bench-go"), deploymentsRule, []int{1, 10, 25, 50}},
	} {
		// A first start compiles the module into the cache: the figures are for a warm one.
		config, names := density(c.module, ns, 1, c.rules)
		warm := startHost(b, config, "--compilation-cache", cache, "--metrics-bind-address", "127.0.0.1:0")
		warm.reconciledAll(b, names, 5*time.Minute)
		warm.terminate(b)
		var first float64
		for _, n := range c.counts {
			b.Run(fmt.Sprintf("%s-plugins=%d", c.lang, n), func(b *testing.B) {
				config, names := density(c.module, ns, n, c.rules)
				var rss float64
				for b.Loop() {
					h := startHost(b, config, "--compilation-cache", cache, "--metrics-bind-address", "127.0.0.1:0")
					h.reconciledAll(b, names, 5*time.Minute)
					rss = residentMiB(b, h.cmd.Process.Pid)
					h.terminate(b)
				}
				if n == 1 {
					first = rss
				}
				b.ReportMetric(rss, "MiB-RSS")
				if n > 1 && first > 0 {
					b.ReportMetric((rss-first)/float64(n-1), "MiB/extra-plugin")
				}
			})
		}
	}
}

// residentMiB reads a process's VmRSS: what it holds now.
func residentMiB(t testing.TB, pid int) float64 { return procStatusMiB(t, pid, "VmRSS") }

// peakResidentMiB reads a process's VmHWM: the most it has held since it started (exec resets
// it). Read it while the process runs: once it has exited, all that is left is the rusage of
// wait4, whose ru_maxrss on Linux starts at the forking process's RSS, so a child smaller than
// the test binary reports the test binary.
func peakResidentMiB(t testing.TB, pid int) float64 { return procStatusMiB(t, pid, "VmHWM") }

// procStatusMiB reads one "kB" field of /proc/PID/status, in MiB.
func procStatusMiB(t testing.TB, pid int, field string) float64 {
	t.Helper()
	mib, err := readProcStatusMiB(pid, field)
	must(t, err)
	return mib
}

func readProcStatusMiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field+":" && f[2] == "kB" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// samplePrivate samples a process's RssAnon every 50 ms until the returned func is called,
// which returns the most it saw. RssAnon is its private memory (heap, stacks, compiled guest
// code): VmHWM also counts the pages of the binary it touched, which processes running the
// same binary share, and which are most of an idle host's RSS. Linux keeps no high-water mark
// of RssAnon alone, hence the sampling: a spike shorter than 50 ms can be missed.
func samplePrivate(pid int) (peak func() float64) {
	var (
		mu   sync.Mutex
		max  float64
		done = make(chan struct{})
		exit = make(chan struct{})
	)
	go func() {
		defer close(exit)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if mib, err := readProcStatusMiB(pid, "RssAnon"); err == nil {
				mu.Lock()
				max = math.Max(max, mib)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		<-exit
		mu.Lock()
		defer mu.Unlock()
		return max
	}
}
