package metrics_test

import (
	"testing"

	"k8s.io/client-go/util/workqueue"

	"github.com/wasmrec/wasmrec/host/metrics"
)

// A controller's counters are there at 0 before its first reconcile, each result included, as
// controller-runtime's are: an error rate of 0, not no data.
func TestControllerCountersStartAtZero(t *testing.T) {
	m := metrics.New()
	m.Controller("p")
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"controller_runtime_reconcile_total":                 4, // success, error, requeue, requeue_after
		"controller_runtime_reconcile_errors_total":          1,
		"controller_runtime_terminal_reconcile_errors_total": 1,
		"controller_runtime_reconcile_panics_total":          1,
	}
	for _, f := range families {
		n, ok := want[f.GetName()]
		if !ok {
			continue
		}
		delete(want, f.GetName())
		if len(f.Metric) != n {
			t.Errorf("%s: %d series, want %d", f.GetName(), len(f.Metric), n)
		}
		for _, s := range f.Metric {
			if v := s.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s %v = %v, want 0", f.GetName(), s.Label, v)
			}
		}
	}
	for name := range want {
		t.Errorf("%s is not served before the first reconcile", name)
	}
}

// Forget deletes every series of a plugin and of no other: 1000 plugin objects created and
// deleted left 96,045 series behind.
func TestForgetDeletesAPluginsSeries(t *testing.T) {
	m := metrics.New()
	series := func(plugin string) int {
		t.Helper()
		families, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range families {
			for _, s := range f.Metric {
				for _, l := range s.Label {
					if (l.GetName() == "plugin" || l.GetName() == "controller" || l.GetName() == "name") && l.GetValue() == plugin {
						n++
						break
					}
				}
			}
		}
		return n
	}
	for _, p := range []string{"team-a.gone", "team-b.stays"} {
		r := m.Controller(p)
		r.SetMaxWorkers(2)
		r.Reconciled("error", false, false, 0)
		m.HostCalls.WithLabelValues(p, "get", "ok").Inc()
		m.Swaps.WithLabelValues(p, "swapped").Inc()
		m.Running.WithLabelValues(p).Set(1)
		m.WorkqueueProvider().NewAddsMetric(p).Inc()
		m.RegisterPlugin(p, func() metrics.PluginStats { return metrics.PluginStats{Digest: "sha256:ab"} })
	}
	before := series("team-b.stays")
	if series("team-a.gone") == 0 || before == 0 {
		t.Fatal("no series to forget")
	}
	m.Forget("team-a.gone")
	if n := series("team-a.gone"); n != 0 {
		t.Errorf("%d series of the forgotten plugin left", n)
	}
	if n := series("team-b.stays"); n != before {
		t.Errorf("the other plugin has %d series, had %d", n, before)
	}
}

// A queue made anew under a name, as a restarted controller makes it, starts at depth 0: the
// keys the one before it dropped at its shutdown stay out of the gauge (they read 500 with
// nothing queued).
func TestANewQueueStartsAtDepthZero(t *testing.T) {
	m := metrics.New()
	depth := func() float64 {
		families, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "workqueue_depth" {
				return f.Metric[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no workqueue_depth")
		return 0
	}
	old := workqueue.NewTypedWithConfig[string](workqueue.TypedQueueConfig[string]{Name: "p", MetricsProvider: m.WorkqueueProvider()})
	for _, k := range []string{"a", "b", "c"} {
		old.Add(k)
	}
	old.ShutDown() // its keys dropped
	if d := depth(); d != 3 {
		t.Fatalf("depth %g before the restart, want 3", d)
	}
	q := workqueue.NewTypedWithConfig[string](workqueue.TypedQueueConfig[string]{Name: "p", MetricsProvider: m.WorkqueueProvider()})
	defer q.ShutDown()
	q.Add("a")
	if d := depth(); d != 1 {
		t.Errorf("depth %g with one key queued, want 1", d)
	}
}
