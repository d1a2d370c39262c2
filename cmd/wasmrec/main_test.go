package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// `wasmrec dev` (what `make run` runs) starts the control plane, creates the demo Apps, and the
// controller creates their ConfigMaps, follows edits and recreates deleted ConfigMaps.
func TestDev(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"dev", "--duration", "12s", "--churn-interval", "1s",
		"--kubeconfig-out", t.TempDir() + "/kubeconfig"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	out, log := stdout.String(), stderr.String()
	for _, want := range []string{"control plane up at https://127.0.0.1:", "created Apps [frontend backend worker]"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, app := range []string{"frontend", "backend", "worker"} {
		if !regexp.MustCompile(`app=demo/` + app + ` generation=1 configMap=created`).MatchString(log) {
			t.Errorf("no ConfigMap created for app %s", app)
		}
	}
	// Churn edits an App twice in every three ticks and deletes a ConfigMap on the third.
	if !regexp.MustCompile(`generation=[2-9]\d* configMap=updated message="edit \d+ of`).MatchString(log) {
		t.Error("no edit was reconciled into its ConfigMap")
	}
	if n := strings.Count(log, "configMap=created"); n < 4 {
		t.Errorf("%d ConfigMaps created, want the 3 first ones and at least one recreated after churn deleted it", n)
	}
	if strings.Contains(log, "level=ERROR") {
		t.Errorf("errors in the log:\n%s", log)
	}
	if t.Failed() {
		t.Logf("log:\n%s", log)
	}
}

func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "wasmrec ") {
		t.Fatalf("version printed %q", stdout.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"frobnicate"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
		t.Fatalf("err = %v, want unknown command", err)
	}
}
