package explore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/internal/explore"
	"github.com/wasmrec/wasmrec/internal/plugintest"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

func module(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "bin", "testguests", name+".wasm"))
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	return b
}

// workload is the first case of a file of testdata/corpus/tests: widgets.yaml, unless given.
func workload(t *testing.T, file string) plugintest.Case {
	t.Helper()
	if file == "" {
		file = "widgets.yaml"
	}
	f, err := plugintest.ReadFile(filepath.Join("testdata", "corpus", "tests", file))
	if err != nil {
		t.Fatal(err)
	}
	return f.Cases[0]
}

func load(t *testing.T, name string) *plugintest.Suite {
	t.Helper()
	ctx := context.Background()
	s, err := plugintest.Load(ctx, module(t, name), plugintest.Options{}) // compiled modules kept in the user cache directory, as wasmrec test keeps them
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(ctx) })
	return s
}

// Each plugin of the corpus has a bug of a kind Sieve and Kamera report; exploration finds it,
// under the fault that shows it (the loop and the map function, without one), and passes its
// correct twin.
//
// What each exploration found, and in how long, goes to bin/explore-corpus.txt (make test prints
// it).
func TestCorpus(t *testing.T) {
	var report strings.Builder
	report.WriteString(">> the exploration corpus (internal/explore/testdata/corpus), compilation aside:\n")
	defer func() {
		if !t.Failed() {
			_ = os.WriteFile(filepath.Join("..", "..", "bin", "explore-corpus.txt"), []byte(report.String()), 0o644)
		}
	}()
	for _, tc := range []struct {
		plugin   string
		fault    string // "" for the run without faults
		want     string // a problem holds it
		workload string // its file in testdata/corpus/tests, if not widgets.yaml
	}{
		{"twice", plugintest.FaultCrash, "ConfigMap default/w-*: 2, without faults 1", ""},
		{"staledelete", plugintest.FaultStale, "ConfigMap default/w-data was deleted and created again", ""},
		{"forgetful", plugintest.FaultCrash, `status: removed (was {"phase":"Ready"})`, ""},
		{"stalestatus", plugintest.FaultStale, `status.size`, ""},
		{"loop", "", "loop: Widget.corpus.wasmrec.dev default/w was reconciled 20 times", ""},
		{"edge", plugintest.FaultCoalesce, `status.resizes: 2 -> 1`, ""},
		{"mapped", "", `reconciled again once settled, Widget.corpus.wasmrec.dev default/w wrote patch Widget.corpus.wasmrec.dev default/w (status.value: "1" -> "2")`, "configs.yaml"},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			ctx := context.Background()
			c := workload(t, tc.workload)
			rep, err := explore.Explore(ctx, load(t, "explore-"+tc.plugin), c, explore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d reconciles without faults; %d of %d schedules failed, in %s", tc.plugin, rep.Baseline.Reconciles, len(rep.Failed), rep.Schedules, rep.Duration)
			found := false
			var saved *plugintest.Case // the first failing run, as a case
			if tc.fault == "" {
				found = strings.Contains(strings.Join(rep.Baseline.Problems, "\n"), tc.want)
				t.Logf("without faults: %s", strings.Join(rep.Baseline.Problems, "\n"))
			}
			for _, r := range rep.Failed {
				if r.Faults[0].Type == tc.fault && strings.Contains(strings.Join(r.Problems, "\n"), tc.want) {
					if !found {
						t.Logf("%s:\n  %s", r.Faults[0], strings.Join(r.Problems, "\n  "))
						saved = &plugintest.Case{Name: "saved", Before: c.Before, Explore: &plugintest.Exploration{Changes: c.Explore.Changes, Faults: r.Faults}}
					}
					found = true
				}
			}
			how := "without faults"
			if saved != nil {
				how = saved.Explore.Faults[0].String()
			}
			fmt.Fprintf(&report, "%-12s found in %s (%d of %d faults failed), first by: %s\n", tc.plugin, rep.Duration.Round(time.Millisecond), len(rep.Failed), rep.Schedules, how)
			if !found {
				for _, r := range rep.Failed {
					t.Logf("%s: %s", r.Faults[0], strings.Join(r.Problems, "; "))
				}
				t.Errorf("no %q run found %q", tc.fault, tc.want)
			}

			twin := load(t, "explore-"+tc.plugin+"-fixed")
			if saved != nil { // the case wasmrec explore saves fails with the bug, passes without
				if out, err := explore.RunCase(ctx, load(t, "explore-"+tc.plugin), *saved); err != nil || out.Passed() {
					t.Errorf("the saved case passed with the bug: %v %v", out.Failures, err)
				}
				out, err := explore.RunCase(ctx, twin, *saved)
				if err != nil || !out.Passed() {
					t.Errorf("the saved case failed on the twin: %v %v", out.Failures, err)
				}
				for _, n := range out.Notes { // the twin may no longer do what the fault struck
					t.Logf("the saved case on the twin: %s", n)
				}
				// A fault past the end of the run tests nothing: the case fails, saying so.
				past := *saved
				past.Explore = &plugintest.Exploration{Changes: c.Explore.Changes, Faults: []plugintest.Fault{{Type: plugintest.FaultCrash, Reconcile: 500}}}
				if out, err := explore.RunCase(ctx, twin, past); err != nil || out.Passed() || !strings.Contains(out.Failures[0], "never struck: the run made only") {
					t.Errorf("a fault at reconcile 500: %v %v", out.Failures, err)
				}
			}
			fixed, err := explore.Explore(ctx, twin, c, explore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s twin: %d of %d schedules failed, in %s", tc.plugin, len(fixed.Failed), fixed.Schedules, fixed.Duration)
			fmt.Fprintf(&report, "%-12s its twin passes %d faults in %s\n", "", fixed.Schedules, fixed.Duration.Round(time.Millisecond))
			for _, p := range fixed.Baseline.Problems {
				t.Errorf("twin, without faults: %s", p)
			}
			for _, r := range fixed.Failed {
				t.Errorf("twin, %s: %s", r.Faults[0], strings.Join(r.Problems, "; "))
			}
		})
	}
}
