package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// BenchmarkIdleDensity measures what idle plugins cost a host, and how soon one wakes: n plugins
// (of one module, or of n different modules) each watching one Deployment, every one reconciled
// once, then left idle until the host has closed their instances (idleTimeout: 1s) and, in the
// "code-let-go" tier, let go of their compiled modules too (codeIdleTimeout: 1s); the "kept"
// tier keeps its instances (idleTimeout: 0s), the floor the others are read against. It reports
// the host's RSS then, and the time from a change of the Deployment to each plugin's reconcile of it, p50
// and p99 over the plugins. Aims: 200 idle Go plugins in 1 GiB or less, 1000 C plugins in 400
// MiB or less, 100 different Go modules in 1 GiB or less; a Go plugin's p99 wake 50 ms or less
// with its compiled module kept, 500 ms or less after it was let go.
func BenchmarkIdleDensity(b *testing.B) {
	ns := oneDeployment(b)
	cache := b.TempDir()
	goModule, cModule := wasmFile(b, "testguests", "bench-go"), wasmFile(b, "testguests", "benchc")
	for _, c := range []struct {
		lang, module string
		distinct     bool   // each plugin a module of its own (the same code, another digest)
		tier         string // what an idle plugin holds: "kept" (its instance), "instances-closed", "code-let-go"
		counts       []int
	}{
		{"c", cModule, false, "instances-closed", []int{1, 100, 1000}},
		{"go", goModule, false, "kept", []int{1, 10}},
		{"go", goModule, false, "instances-closed", []int{1, 10, 100, 200}},
		{"go", goModule, false, "code-let-go", []int{1, 10, 100}},
		{"go-distinct", goModule, true, "code-let-go", []int{10, 100}},
	} {
		for _, n := range c.counts {
			b.Run(fmt.Sprintf("%s-plugins=%d-%s", c.lang, n, c.tier), func(b *testing.B) {
				modules := []string{c.module}
				if c.distinct {
					modules = distinctModules(b, c.module, n)
				}
				extra := "    idleTimeout: 1s\n"
				switch c.tier {
				case "kept":
					extra = "    idleTimeout: 0s\n"
				case "code-let-go":
					extra += "    codeIdleTimeout: 1s\n"
				}
				config, names := densityOf(modules, ns, n, deploymentsRule, extra)
				args := []string{"--compilation-cache", cache, "--metrics-bind-address", "127.0.0.1:0"}
				// A first start compiles the modules into the cache: the figures are for a warm one.
				// n distinct 17 MB Go modules take about 20 s each to compile on 2 cores.
				warmup := 10 * time.Minute
				if c.distinct {
					warmup += time.Duration(n) * 30 * time.Second
				}
				warm := startHost(b, config, args...)
				warm.reconciledAll(b, names, warmup)
				warm.terminate(b)
				var rss float64
				var wake []time.Duration
				for b.Loop() {
					h := startHost(b, config, args...)
					h.reconciledAll(b, names, 10*time.Minute)
					addr := metricsAddrRE.FindStringSubmatch(h.out.String())[1]
					if c.tier != "kept" {
						h.waitIdle(b, addr+"/metrics", time.Minute)
					}
					// The host gives released code's memory back in two collections soon after
					// (its reclaimer): RSS read at the last release would count the last ones.
					time.Sleep(2 * time.Second)
					if c.tier == "code-let-go" {
						time.Sleep(3 * time.Second) // past the code idle timeout, counted from the pool's last close
					}
					rss = residentMiB(b, h.cmd.Process.Pid)
					wake = wakeAll(b, addr+"/metrics", ns, names)
					h.terminate(b)
				}
				slices.Sort(wake)
				p := func(q float64) float64 {
					return float64(wake[min(len(wake)-1, int(q*float64(len(wake))))].Microseconds()) / 1000
				}
				b.ReportMetric(rss, "MiB-RSS-idle")
				b.ReportMetric(p(0.5), "ms-wake-p50")
				b.ReportMetric(p(0.99), "ms-wake-p99")
			})
		}
	}
}

// densityOf is density with plugins of modules in turn, and extra lines in each plugin's entry.
func densityOf(modules []string, ns string, n int, rules, extra string) (config string, names []string) {
	var b strings.Builder
	b.WriteString("plugins:\n")
	for i := range n {
		name := fmt.Sprintf("team-%03d", i)
		names = append(names, name)
		fmt.Fprintf(&b, "  - name: %s\n    module: %s\n    namespaces: [%s]\n    permissions:\n      - %s\n%s", name, modules[i%len(modules)], ns, rules, extra)
	}
	return b.String(), names
}

// distinctModules writes n copies of module, each with a custom section of its own: the same
// code under n digests, as n different plugins' modules are to the host.
func distinctModules(t testing.TB, module string, n int) []string {
	b, err := os.ReadFile(module)
	must(t, err)
	dir := t.TempDir()
	var out []string
	for i := range n {
		payload := append([]byte{4}, "copy"...) // the section's name, then its bytes
		payload = binary.AppendUvarint(payload, uint64(i))
		section := append([]byte{0}, binary.AppendUvarint(nil, uint64(len(payload)))...)
		path := filepath.Join(dir, fmt.Sprintf("copy-%03d.wasm", i))
		must(t, os.WriteFile(path, append(append(slices.Clone(b), section...), payload...), 0o644))
		out = append(out, path)
	}
	return out
}

// waitIdle waits until no plugin of the host has a live instance.
func (h *hostProcess) waitIdle(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		live := gaugeSum(t, url, "wasmrec_plugin_instances")
		if live == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v instances still live %s after every plugin reconciled", live, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gaugeSum adds a metric's values over its series.
func gaugeSum(t testing.TB, url, metric string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		must(t, err)
		sum += v
	}
	must(t, sc.Err())
	return sum
}

// wakeAll changes the Deployment every plugin watches and returns how long each plugin took to
// reconcile it (its successes going up), polling the host's metrics.
func wakeAll(t testing.TB, url, ns string, names []string) []time.Duration {
	t.Helper()
	before := successes(t, url)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench/wake":%q}}}`, time.Now().String())
	start := time.Now()
	_, err := kubernetes.NewForConfigOrDie(cfg).AppsV1().Deployments(ns).Patch(context.Background(), "one", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	must(t, err)
	took := map[string]time.Duration{}
	deadline := start.Add(2 * time.Minute)
	for len(took) < len(names) {
		now := successes(t, url)
		at := time.Since(start)
		for _, n := range names {
			if _, ok := took[n]; !ok && now[n] > before[n] {
				took[n] = at
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d plugins reconciled the change in 2m", len(took), len(names))
		}
		time.Sleep(2 * time.Millisecond)
	}
	out := make([]time.Duration, 0, len(took))
	for _, d := range took {
		out = append(out, d)
	}
	return out
}
