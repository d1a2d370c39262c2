package recording

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// hashStep is about what a Go guest's reconcile of BenchmarkConfigMapHash records: a get and a
// patch of a ConfigMap, and the clock readings of its runtime.
func hashStep(i int) *Step {
	s := &Step{Kind: StepReconcile, Request: &Request{Namespace: "bench", Name: fmt.Sprint("cm-", i)}, Outcome: Returned}
	obj := bytes.Repeat([]byte(`{"k":"v"}`), 70)
	s.Add(Event{Type: EventCall, Fn: "get", In: obj[:80], Out: obj})
	for j := range 40 {
		s.Add(Event{Type: EventMonotime, N: int64(i*1000 + j)})
	}
	s.Add(Event{Type: EventCall, Fn: "patch", In: obj[:200], Out: obj})
	return s
}

// BenchmarkStoreAll is the writer's cost of recording every reconcile of one instance.
func BenchmarkStoreAll(b *testing.B) {
	s, err := Open(b.TempDir(), 1<<30, logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	lineage := []*Step{hashStep(-1)}
	i := 0
	for b.Loop() {
		st := hashStep(i)
		s.Put(&Recording{Format: Format, Plugin: "p", Instance: "bench", Time: time.Now(), Step: st}, lineage)
		lineage = append(lineage, st)
		i++
		if i%200 == 0 {
			s.Flush()
		}
	}
	s.Flush()
}
