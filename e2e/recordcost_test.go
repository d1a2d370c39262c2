package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/host/recording"
)

// BenchmarkRecordingCost runs BenchmarkConfigMapHash's reconcile on 2000 ConfigMaps with the
// plugin's recording off, on for failures (none fail: the cost of capturing every reconcile's
// inputs, which a failure's recording needs), and on for every reconcile, one after the other,
// for 6 rounds (each mode first in two), for the untyped Go guest (hash-go) and the typed one
// (hashtyped-go). It prints the CPU and peak RSS of each against recording off (medians), and
// the bytes on disk per recorded reconcile.
func BenchmarkRecordingCost(b *testing.B) {
	const n, rounds = 2000, 6
	modes := []string{"none", "failures", "all"}
	for _, guest := range []string{"hash-go", "hashtyped-go"} {
		b.Run(guest, func(b *testing.B) {
			runs := map[string][]hashFigures{}
			var bytes, recorded int64
			for b.Loop() {
				for round := range rounds {
					// Each mode goes first in as many rounds as the others: the first run of a
					// round shares the API server with the deletion of the round before.
					for i := range modes {
						mode := modes[(round+i)%len(modes)]
						dir := filepath.Join(b.TempDir(), "recordings")
						impl := hashImpl{name: mode, start: func(b *testing.B, ns string) *exec.Cmd {
							return startHashPluginWith(b, guest, ns, fmt.Sprintf("    record: {mode: %s}\n", mode), "--recordings-dir", dir)
						}}
						runs[mode] = append(runs[mode], hashRun(b, impl, n))
						if mode == "all" {
							nb, nr := recordingsSize(b, filepath.Join(dir, guest))
							bytes, recorded = bytes+nb, recorded+nr
						}
					}
				}
			}
			off := median(runs["none"])
			fmt.Fprintf(os.Stderr, "\n%s, %d ConfigMaps, recording   CPU       peak RSS\n", guest, n)
			for _, mode := range modes {
				f := median(runs[mode])
				fmt.Fprintf(os.Stderr, "  %-10s %-9s %.0f MiB", mode, f.cpu.Round(time.Millisecond), f.rssMiB)
				if mode != "none" {
					cpu, rss := f.cpu.Seconds()/off.cpu.Seconds(), f.rssMiB/off.rssMiB
					fmt.Fprintf(os.Stderr, "   (x none: CPU %.3f, RSS %.2f)", cpu, rss)
					b.ReportMetric(cpu, mode+"-cpu-x")
					b.ReportMetric(rss, mode+"-rss-x")
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
