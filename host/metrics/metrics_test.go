package metrics_test

import (
	"testing"

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
