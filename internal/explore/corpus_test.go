package explore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/internal/explore"
	"github.com/wasmrec/wasmrec/internal/plugintest"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

func module(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "bin", "testguests", name+".wasm"))
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	return b
}

func workload(t *testing.T) plugintest.Case {
	t.Helper()
	f, err := plugintest.ReadFile(filepath.Join("testdata", "corpus", "tests", "widgets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return f.Cases[0]
}

func load(t *testing.T, name string) *plugintest.Suite {
	t.Helper()
	ctx := context.Background()
	s, err := plugintest.Load(ctx, module(t, name), plugintest.Options{CacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(ctx) })
	return s
}

// Each plugin of the corpus has a bug of a kind Sieve and Kamera report; exploration finds it,
// under the fault that shows it (the loop, without one), and passes its correct twin.
func TestCorpus(t *testing.T) {
	for _, tc := range []struct {
		plugin string
		fault  string // "" for the run without faults
		want   string // a problem holds it
	}{
		{"twice", plugintest.FaultCrash, "ConfigMap default/w-*: 2, without faults 1"},
		{"staledelete", plugintest.FaultStale, "ConfigMap default/w-data was deleted and created again"},
		{"forgetful", plugintest.FaultCrash, `status: removed (was {"phase":"Ready"})`},
		{"stalestatus", plugintest.FaultStale, `status.size`},
		{"loop", "", "loop: Widget.corpus.wasmrec.dev default/w was reconciled 20 times"},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			ctx := context.Background()
			c := workload(t)
			rep, err := explore.Explore(ctx, load(t, "explore-"+tc.plugin), c, explore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d reconciles without faults; %d of %d schedules failed, in %s", tc.plugin, rep.Baseline.Reconciles, len(rep.Failed), rep.Schedules, rep.Duration)
			found := false
			if tc.fault == "" {
				found = strings.Contains(strings.Join(rep.Baseline.Problems, "\n"), tc.want)
				t.Logf("without faults: %s", strings.Join(rep.Baseline.Problems, "\n"))
			}
			for _, r := range rep.Failed {
				if r.Faults[0].Type == tc.fault && strings.Contains(strings.Join(r.Problems, "\n"), tc.want) {
					if !found {
						t.Logf("%s:\n  %s", r.Faults[0], strings.Join(r.Problems, "\n  "))
					}
					found = true
				}
			}
			if !found {
				for _, r := range rep.Failed {
					t.Logf("%s: %s", r.Faults[0], strings.Join(r.Problems, "; "))
				}
				t.Errorf("no %q run found %q", tc.fault, tc.want)
			}

			fixed, err := explore.Explore(ctx, load(t, "explore-"+tc.plugin+"-fixed"), c, explore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s twin: %d of %d schedules failed, in %s", tc.plugin, len(fixed.Failed), fixed.Schedules, fixed.Duration)
			for _, p := range fixed.Baseline.Problems {
				t.Errorf("twin, without faults: %s", p)
			}
			for _, r := range fixed.Failed {
				t.Errorf("twin, %s: %s", r.Faults[0], strings.Join(r.Problems, "; "))
			}
		})
	}
}
