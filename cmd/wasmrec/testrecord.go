package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/internal/plugintest"
)

// writeRecordedCase makes a case of a recording (the one of that digest in recordings, or its
// newest failed one) and writes it to dir/tests/recorded-<digest>.yaml, saying what it wrote and
// what the case cannot hold.
func writeRecordedCase(dir, recordings, digest string, stdout io.Writer) (string, error) {
	recDir, err := recordingsDirOf(recordings)
	if err != nil {
		return "", fmt.Errorf("--from-recording: %w", err)
	}
	if digest == "" {
		listed, err := recording.List(recDir)
		if err != nil {
			return "", err
		}
		if len(listed) == 0 {
			return "", fmt.Errorf("--from-recording: %w", noRecordings(recDir, recordings))
		}
		for _, l := range listed { // the oldest first: the last failed is the newest
			if l.Failed {
				digest = l.Digest
			}
		}
		if digest == "" {
			return "", fmt.Errorf("--from-recording: %s holds no failed reconcile: give one with --digest (wasmrec replay %s --list)", recDir, recordings)
		}
	}
	rec, _, err := recording.Load(recDir, digest)
	if err != nil {
		return "", err
	}
	short := recording.ShortDigest(recordingDigest(recDir, digest))
	c, notes, err := plugintest.FromRecording(fmt.Sprintf("recorded %s %s/%s", short, rec.Request.Namespace, rec.Request.Name), rec)
	if err != nil {
		return "", fmt.Errorf("recording %s: %w", short, err)
	}
	b, err := yaml.Marshal(plugintest.File{Cases: []plugintest.Case{c}})
	if err != nil {
		return "", err
	}
	var head strings.Builder
	fmt.Fprintf(&head, "# The reconcile of %s recorded at %s (recording %s, module %s):\n", rec.Request.String(), rec.Time.Format("2006-01-02T15:04:05Z"), short, recording.ShortDigest(rec.Module))
	head.WriteString("# before is what it read, after, gone, events and result what it did.\n")
	for _, n := range notes {
		head.WriteString("# Note: " + n + ".\n")
	}
	path := filepath.Join(dir, "tests", "recorded-"+short+".yaml")
	if _, err := os.Stat(path); err == nil {
		return "", fmt.Errorf("%s exists (a case made of this recording, maybe edited since): remove it to make it again, or run the tests without --from-recording", relative(path))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, append([]byte(head.String()), b...), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(stdout, "wrote %s from recording %s\n", relative(path), short)
	for _, n := range notes {
		fmt.Fprintf(stdout, "  note: %s\n", n)
	}
	return path, nil
}

// recordingDigest is the whole digest of the recording a prefix names.
func recordingDigest(dir, prefix string) string {
	listed, _ := recording.List(dir)
	for _, l := range listed {
		if strings.HasPrefix(strings.TrimPrefix(l.Digest, "sha256:"), strings.TrimPrefix(prefix, "sha256:")) {
			return l.Digest
		}
	}
	return prefix
}
