package explore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmrec/wasmrec/internal/explore"
	"github.com/wasmrec/wasmrec/internal/plugintest"
)

// BenchmarkExplore explores the corpus workload on n Widgets, with the twin of stalestatus
// (every fault passes, so every run goes to its end): its figure is the time of a whole
// exploration.
func BenchmarkExplore(b *testing.B) {
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("widgets=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, err := plugintest.Load(ctx, module(b, "explore-stalestatus-fixed"), plugintest.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			c := plugintest.Case{Name: "widgets", Explore: &plugintest.Exploration{}}
			for i := range n {
				c.Before = append(c.Before, map[string]any{"apiVersion": "corpus.wasmrec.dev/v1", "kind": "Widget",
					"metadata": map[string]any{"namespace": "default", "name": fmt.Sprintf("w%d", i)}, "spec": map[string]any{"size": 1}})
			}
			c.Explore.Changes = []plugintest.Change{
				{Put: map[string]any{"apiVersion": "corpus.wasmrec.dev/v1", "kind": "Widget", "metadata": map[string]any{"namespace": "default", "name": "w0"}, "spec": map[string]any{"size": 2}}},
				{Delete: &plugintest.Ref{APIVersion: "corpus.wasmrec.dev/v1", Kind: "Widget", Namespace: "default", Name: "w0"}},
			}
			var rep *explore.Report
			for b.Loop() {
				if rep, err = explore.Explore(ctx, s, c, explore.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			if len(rep.Failed) > 0 || len(rep.Baseline.Problems) > 0 {
				b.Fatalf("the twin failed: %+v", rep.Failed)
			}
			b.ReportMetric(float64(rep.Schedules), "faults")
			b.ReportMetric(float64(rep.Baseline.Reconciles), "reconciles/run")
		})
	}
}
