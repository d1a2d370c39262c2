package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// wasmrec explore finds the corpus's crash bug, prints its fault and saves it as a case; wasmrec
// test then fails that case with the bug and passes it with the twin; exploring again saves
// nothing new.
func TestExploreCommand(t *testing.T) {
	buggy, err := filepath.Abs("../../bin/testguests/explore-twice.wasm")
	if err == nil {
		_, err = os.Stat(buggy)
	}
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	twin, _ := filepath.Abs("../../bin/testguests/explore-twice-fixed.wasm")
	workload, err := os.ReadFile("../../internal/explore/testdata/corpus/tests/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "widgets.yaml"), workload, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cache := "" // the user cache directory's, as wasmrec explore keeps them
	var out bytes.Buffer
	err = run(ctx, []string{"explore", dir, "--module", buggy, "--compilation-cache", cache}, &out, &out)
	if err == nil || err.Error() != "1 of 1 case failed" {
		t.Errorf("err = %v, want 1 of 1 case failed", err)
	}
	saved := filepath.Join(dir, "tests", "explored-a-widget-resized-and-deleted-1.yaml")
	for _, want := range []string{
		"  a widget resized and deleted: 8 reconciles and 2 writes without faults; trying 14 faults\n",
		"    FAIL  under 3 of 14 faults, in ",
		"      crash in reconcile 1 after 1 write, then a restart that lists every object\n",
		"          settled at the start: ConfigMap default/w-*: 2, without faults 1\n",
		"          saved " + saved + "\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "    - afterWrites: 1\n      reconcile: 1\n      type: crash\n") {
		t.Errorf("the saved case lacks its fault:\n%s", b)
	}

	out.Reset()
	err = run(ctx, []string{"test", saved, "--module", buggy, "--compilation-cache", cache}, &out, &out)
	if err == nil || !strings.Contains(out.String(), "settled at the start: ConfigMap default/w-*: 2, without faults 1") {
		t.Errorf("the saved case with the bug: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"test", dir, "--module", twin, "--compilation-cache", cache}, &out, &out); err != nil {
		t.Errorf("the cases with the twin: %v\n%s", err, out.String())
	}

	out.Reset()
	_ = run(ctx, []string{"explore", dir, "--module", buggy, "--compilation-cache", cache}, &out, &out)
	if strings.Contains(out.String(), "          saved ") || !strings.Contains(out.String(), "already saved in") {
		t.Errorf("exploring again saved again:\n%s", out.String())
	}
}
