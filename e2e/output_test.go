package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
)

// A guest that writes 100 MiB to stdout in every reconcile, reconcile after reconcile, leaves
// only its log limit's worth in the host log, and its drops are counted. A neighbour plugin's
// latency (a ConfigMap created until its hash annotation is written) is logged before and
// during the flood; it is a figure, not a check: BenchmarkNoisyNeighbour measures it.
func TestGuestOutputFloodLeavesNeighboursAlone(t *testing.T) {
	h, addr, loudNS, quietNS := besideANeighbour(t, "loud")
	before := neighbourLatencies(t, quietNS, "before", 20)
	logBefore := len(h.out.String())
	began := time.Now()
	misbehaving(t, loudNS, "flood")
	h.waitOut(t, "dropped the plugin's output past its log limit")
	during := neighbourLatencies(t, quietNS, "during", 20)
	elapsed := time.Since(began)

	dropped := scrape(t, addr, `wasmrec_plugin_log_dropped_bytes_total{plugin="loud"}`)
	logged := len(h.out.String()) - logBefore
	t.Logf("in %s of flood: %.0f MiB dropped, %d KiB logged; neighbour latency median %s before, %s during",
		elapsed.Round(time.Millisecond), dropped/(1<<20), logged>>10, medianDuration(before), medianDuration(during))
	if dropped < 100<<20 {
		t.Errorf("%.0f bytes of output dropped, want at least one reconcile's 100 MiB", dropped)
	}
	// The byte rate (1 MiB/s, bursts of 2 MiB) bounds the log; the host's own lines are few.
	if limit := 2<<20 + int(elapsed.Seconds()*(1<<20)) + 64<<10; logged > limit {
		t.Errorf("%d bytes logged during the flood, over the limit's %d", logged, limit)
	}
}

// besideANeighbour starts a host running the misbehave guest as plugin name in loudNS and the
// hashc guest as plugin "quiet" in quietNS, for a test of how one plugin's misbehaviour reaches
// the other. It returns the host and its metrics URL.
func besideANeighbour(t *testing.T, name string) (h *hostProcess, metricsURL, loudNS, quietNS string) {
	t.Helper()
	loudNS, quietNS = namespace(t), namespace(t)
	config := fmt.Sprintf(`plugins:
  - name: %s
    module: %s
    namespaces: [%s]
    permissions:
      - {resources: [configmaps], verbs: [get, list, watch]}
  - name: quiet
    module: %s
    namespaces: [%s]
    maxConcurrentReconciles: 2
    permissions:
      - {resources: [configmaps], verbs: [get, list, watch, patch]}
`, name, wasmFile(t, "testguests", "misbehave"), loudNS, wasmFile(t, "testguests", "hashc"), quietNS)
	h = startHost(t, config, "--metrics-bind-address", "127.0.0.1:0")
	h.waitOut(t, `msg="serving metrics"`)
	return h, metricsAddrRE.FindStringSubmatch(h.out.String())[1] + "/metrics", loudNS, quietNS
}

// neighbourLatencies creates n ConfigMaps in ns, one at a time, and returns how long each took
// to get its bench/hash annotation from the hashc plugin.
func neighbourLatencies(t *testing.T, ns, prefix string, n int) []time.Duration {
	t.Helper()
	cs := benchClient(t)
	md := metadata.NewForConfigOrDie(benchConfig()).Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(ns)
	var out []time.Duration
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		data := map[string]string{"i": fmt.Sprint(i)}
		list, err := md.List(context.Background(), metav1.ListOptions{Limit: 1})
		must(t, err)
		w, err := md.Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "metadata.name=" + name})
		must(t, err)
		began := time.Now()
		_, err = cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
		must(t, err)
		want := hashData(data)
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case ev := <-w.ResultChan():
				if o, ok := ev.Object.(*metav1.PartialObjectMetadata); ok && o.Annotations["bench/hash"] == want {
					break wait
				}
			case <-timeout:
				t.Fatalf("%s/%s was not reconciled within 30s", ns, name)
			}
		}
		out = append(out, time.Since(began))
		w.Stop()
	}
	return out
}

// scrape reads one series' value from a Prometheus endpoint.
func scrape(t *testing.T, url, series string) float64 {
	t.Helper()
	v, ok := scrapeIf(t, url, series)
	if !ok {
		t.Fatalf("no %s at %s", series, url)
	}
	return v
}

// scrapeIf is scrape of a series that may not be there yet.
func scrapeIf(t *testing.T, url, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			must(t, err)
			return f, true
		}
	}
	return 0, false
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
