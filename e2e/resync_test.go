package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A plugin with a resyncPeriod reconciles every object it sees again, each period, though
// nothing about them changed; one without it does not.
func TestResyncPeriodReconcilesUnchangedObjectsAgain(t *testing.T) {
	ns, still := namespace(t), namespace(t)
	cs := benchClient(t)
	for _, n := range []string{ns, still} {
		for i := range 3 {
			_, err := cs.CoreV1().ConfigMaps(n).Create(context.Background(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{})
			must(t, err)
		}
	}
	hashc := wasmFile(t, "testguests", "hashc")
	h := startHost(t, fmt.Sprintf(`plugins:
  - name: resyncing
    module: %s
    namespaces: [%s]
    resyncPeriod: 2s
    permissions:
      - {resources: [configmaps], verbs: [get, list, watch, patch]}
  - name: still
    module: %s
    namespaces: [%s]
    permissions:
      - {resources: [configmaps], verbs: [get, list, watch, patch]}
`, hashc, ns, hashc, still), "--metrics-bind-address", "127.0.0.1:0")
	h.waitOut(t, `msg="serving metrics"`)
	url := metricsAddrRE.FindStringSubmatch(h.out.String())[1] + "/metrics"
	reconciles := func(plugin string) float64 {
		v, _ := scrapeIf(t, url, fmt.Sprintf(`controller_runtime_reconcile_total{controller=%q,result="success"}`, plugin))
		return v // 0 before the first
	}
	// Each reconciles its 3 objects, then patches each (an update event): 6 at most, then quiet.
	eventually(t, 30*time.Second, "both plugins reconcile their objects", func() error {
		if r, s := reconciles("resyncing"), reconciles("still"); r < 3 || s < 3 {
			return fmt.Errorf("%g and %g reconciles", r, s)
		}
		return nil
	})
	stillBefore := reconciles("still")
	before := reconciles("resyncing")
	eventually(t, 30*time.Second, "the resyncing plugin reconciles its 3 objects again, twice", func() error {
		if r := reconciles("resyncing"); r < before+6 {
			return fmt.Errorf("%g reconciles since, want 6 or more", r-before)
		}
		return nil
	})
	if s := reconciles("still"); s != stillBefore {
		t.Errorf("the plugin without a resyncPeriod reconciled %g more times, though nothing changed", s-stillBefore)
	}
}
