package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/host/recording"
)

// BenchmarkRecordingCost runs BenchmarkConfigMapHash's reconcile on 2000 ConfigMaps with the
// plugin's recording off, on for failures (none fail: the cost of capturing every reconcile's
// inputs, which a failure's recording needs), and on for every reconcile: three hosts at once,
// each on its own namespace (started one after the other, in an order that turns each round),
// for 6 rounds, for the untyped Go guest (hash-go) and the typed one
// (hashtyped-go). Run one after the other, a mode's CPU against recording off's ranged from
// 0.86x to 1.42x over 6 rounds on this machine; run together, the three share whatever the
// machine does meanwhile. It
// prints the CPU and peak RSS of each (medians), and against recording off the median of the
// rounds' ratios, each mode's run against recording off's in the same round, with their
// range; and the bytes on disk per recorded reconcile.
func BenchmarkRecordingCost(b *testing.B) {
	const n, rounds = 2000, 6
	modes := []string{"none", "failures", "all"}
	for _, guest := range []string{"hash-go", "hashtyped-go"} {
		b.Run(guest, func(b *testing.B) {
			runs := map[string][]hashFigures{}
			var bytes, recorded int64
			for b.Loop() {
				for round := range rounds {
					// Each mode starts first, second and last in as many rounds as the others.
					order := append(slices.Clone(modes[round%len(modes):]), modes[:round%len(modes)]...)
					var impls []hashImpl
					dirs := map[string]string{}
					for _, mode := range order {
						dir := filepath.Join(b.TempDir(), "recordings")
						dirs[mode] = dir
						impls = append(impls, hashImpl{name: mode, start: func(b *testing.B, ns string) *exec.Cmd {
							return startHashPluginWith(b, guest, ns, fmt.Sprintf("    record: {mode: %s}\n", mode), "--recordings-dir", dir)
						}})
					}
					for i, f := range hashRunTogether(b, impls, n) {
						runs[order[i]] = append(runs[order[i]], f)
					}
					nb, nr := recordingsSize(b, filepath.Join(dirs["all"], guest))
					bytes, recorded = bytes+nb, recorded+nr
				}
			}
			fmt.Fprintf(os.Stderr, "\n%s, %d ConfigMaps, recording   CPU       peak RSS\n", guest, n)
			for _, mode := range modes {
				f := median(runs[mode])
				fmt.Fprintf(os.Stderr, "  %-10s %-9s %.0f MiB", mode, f.cpu.Round(time.Millisecond), f.rssMiB)
				if mode != "none" {
					cpu := pairedRatios(runs[mode], runs["none"], func(f hashFigures) float64 { return f.cpu.Seconds() })
					rss := pairedRatios(runs[mode], runs["none"], func(f hashFigures) float64 { return f.rssMiB })
					fmt.Fprintf(os.Stderr, "   x none, median of rounds: CPU %.3f (%.3f-%.3f), RSS %.2f (%.2f-%.2f)",
						cpu[len(cpu)/2], cpu[0], cpu[len(cpu)-1], rss[len(rss)/2], rss[0], rss[len(rss)-1])
					b.ReportMetric(cpu[len(cpu)/2], mode+"-cpu-x")
					b.ReportMetric(rss[len(rss)/2], mode+"-rss-x")
				}
				fmt.Fprintln(os.Stderr)
			}
			if recorded > 0 {
				per := float64(bytes) / float64(recorded)
				fmt.Fprintf(os.Stderr, "  all: %d reconciles recorded, %.0f bytes on disk each (the steps before them included)\n", recorded, per)
				b.ReportMetric(per, "bytes/recorded-reconcile")
			}
		})
	}
}

// pairedRatios is, sorted, the ratio of each run's figure to that of the run of base in the same
// round.
func pairedRatios(runs, base []hashFigures, figure func(hashFigures) float64) []float64 {
	r := make([]float64, len(runs))
	for i := range runs {
		r[i] = figure(runs[i]) / figure(base[i])
	}
	slices.Sort(r)
	return r
}

// recordingsSize is what a plugin's recordings directory holds, less the modules kept beside
// them, and how many recordings.
func recordingsSize(b *testing.B, dir string) (bytes, recordings int64) {
	b.Helper()
	listed, err := recording.List(dir)
	must(b, err)
	must(b, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && !strings.HasPrefix(info.Name(), "module-") {
			bytes += info.Size()
		}
		return err
	}))
	return bytes, int64(len(listed))
}
