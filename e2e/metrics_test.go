package e2e

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/plugin"
)

// value returns the value of the series of name whose labels include want, and whether it exists.
func value(t *testing.T, m *metrics.Metrics, name string, want map[string]string) (float64, bool) {
	t.Helper()
	families, err := m.Registry.Gather()
	must(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return metricValue(f.GetType(), s), true
		}
	}
	return 0, false
}

func metricValue(typ dto.MetricType, s *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return s.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return s.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(s.GetHistogram().GetSampleCount())
	}
	return s.GetUntyped().GetValue()
}

// After a known workload (four ConfigMaps reconciled cleanly, one of them making a call outside
// the plugin's permissions) the metrics say exactly that, under controller-runtime's names.
func TestMetricsAfterAKnownWorkload(t *testing.T) {
	ns := namespace(t)
	m := metrics.New()
	logs := &logLines{}
	_, plugins := pluginHostWithMetrics(t, cfg, logs.logger(), m, plugin.Config{Name: "misbehave", Module: wasmFile(t, "testguests", "misbehave"),
		Namespaces: []string{ns}, MaxConcurrentReconciles: 3, Permissions: []abi.Permission{grant("", []string{"configmaps"}, "get", "list", "watch")}})
	misbehaving(t, ns, "fine1", "fine2", "fine3", "forbidden")
	ctrl := map[string]string{"controller": "misbehave"}
	success := map[string]string{"controller": "misbehave", "result": "success"}
	eventually(t, 30*time.Second, "four successful reconciles", func() error {
		if v, _ := value(t, m, "controller_runtime_reconcile_total", success); v != 4 {
			return fmt.Errorf("%v", v)
		}
		return nil
	})
	digest := plugins["misbehave"].Module().Digest()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"controller_runtime_reconcile_total", success, 4},
		{"controller_runtime_reconcile_time_seconds", ctrl, 4},
		{"controller_runtime_max_concurrent_reconciles", ctrl, 3},
		{"controller_runtime_active_workers", ctrl, 0},
		{"workqueue_adds_total", map[string]string{"name": "misbehave"}, 4},
		{"workqueue_depth", map[string]string{"name": "misbehave"}, 0},
		{"wasmrec_plugin_info", map[string]string{"plugin": "misbehave", "digest": digest}, 1},
		{"wasmrec_plugin_host_calls_total", map[string]string{"plugin": "misbehave", "function": "delete", "status": "forbidden"}, 1},
		{"wasmrec_plugin_traps_total", map[string]string{"plugin": "misbehave"}, 0},
	} {
		got, ok := value(t, m, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if v, ok := value(t, m, "controller_runtime_reconcile_errors_total", ctrl); ok && v != 0 {
		t.Errorf("controller_runtime_reconcile_errors_total = %v, want 0", v)
	}
	if v, _ := value(t, m, "wasmrec_plugin_instances", map[string]string{"plugin": "misbehave"}); v < 1 || v > 3 {
		t.Errorf("wasmrec_plugin_instances = %v, want 1 to 3 (the pool's bound)", v)
	}

	// The same, as a scraper sees it.
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		`controller_runtime_reconcile_total{controller="misbehave",result="success"} 4`,
		`wasmrec_plugin_host_calls_total{function="delete",plugin="misbehave",status="forbidden"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(string(body), line) {
			t.Errorf("the scrape lacks %q", line)
		}
	}
}
