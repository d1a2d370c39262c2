package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestAuthorTestsWithoutACluster is docs/plugin-authors.md, "Testing without a cluster", for a C
// plugin, in an empty folder outside the repository: `wasmrec new` writes tests/x.yaml and says
// to run `wasmrec test`, which passes; an edit that breaks the reconcile makes it fail, naming
// the case and the field; a mistake in the file is named by its line, case and field.
func TestAuthorTestsWithoutACluster(t *testing.T) {
	t.Parallel() // builds in a folder of its own; no cluster (see e2e/doc.go)
	a := newAuthor(t)
	out := a.run("", "wasmrec new x --lang c")
	if !strings.Contains(out, "wrote x/tests/x.yaml") || !strings.Contains(out, "\n  wasmrec test\n") {
		t.Errorf("wasmrec new --lang c does not write tests/x.yaml or say to run wasmrec test:\n%s", out)
	}

	start := time.Now()
	out = a.run("x", "wasmrec test")
	cold := time.Since(start)
	for _, want := range []string{"tests/x.yaml\n", "  ok    marks a ConfigMap", "  ok    leaves a marked ConfigMap as it is", "3 cases passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("wasmrec test of the new plugin lacks %q:\n%s", want, out)
		}
	}
	start = time.Now()
	a.run("x", "wasmrec test")
	warm := time.Since(start)

	// The plugin sets another value: the case that checks it fails, naming the field.
	a.edit("x/x.c", `\"true\"`, `\"v2\"`)
	out = a.fails("x", "wasmrec test")
	for _, want := range []string{
		"  FAIL  marks a ConfigMap",
		`after[0] v1 ConfigMap default/x-sample: metadata.annotations["wasmrec.dev/x"]: want "true", got "v2"`,
		"info marked object=default/x-sample",
		"wasmrec: 2 of 3 cases failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("wasmrec test of a broken plugin lacks %q:\n%s", want, out)
		}
	}

	// A misspelt field: the file, the line, the case and the field, before any build.
	a.edit("x/tests/x.yaml", "    result: {}", "    rsult: {}")
	out = a.fails("x", "wasmrec test")
	if want := `tests/x.yaml: line 15: cases[0] (marks a ConfigMap): unknown field "rsult": did you mean "result"?`; !strings.Contains(out, want) || strings.Contains(out, "built ") {
		t.Errorf("wasmrec test of a misspelt file:\n%s\nwant %q, and no build", out, want)
	}
	a.note("   wasmrec test of the C scaffold: %s the first time, %s again\n", cold.Round(10*time.Millisecond), warm.Round(10*time.Millisecond))
	t.Log("\n" + a.transcript.String())
}
