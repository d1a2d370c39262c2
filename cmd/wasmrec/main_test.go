package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// `wasmrec dev` (what `make run` runs) starts the control plane and runs the example plugins:
// app and app-c reconcile their Apps, rollout stamps a config hash when the web ConfigMap
// changes, failing fails with a growing attempt count.
func TestDev(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"dev", "--duration", "25s", "--churn-interval", "1s",
		"--kubeconfig-out", t.TempDir() + "/kubeconfig"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	out, log := stdout.String(), stderr.String()
	if !strings.Contains(out, "control plane up at https://127.0.0.1:") {
		t.Errorf("stdout lacks the control plane's address:\n%s", out)
	}
	for _, want := range []string{
		`msg="plugin loaded" plugin=app `, `msg="plugin loaded" plugin=app-c `,
		`msg="plugin loaded" plugin=rollout `, `msg="plugin loaded" plugin=failing `,
		`reconciled app=demo/frontend generation=1 port=8080" plugin=app `,
		`reconciled app=demo-c/frontend generation=1 port=8080" plugin=app-c `,
		`failing on purpose (attempt 4 for demo/flaky)`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	// The rollout plugin stamps a hash at start and another after churn edits web-config.
	if n := len(regexp.MustCompile(`stamped a new config hash deployment=demo/web`).FindAllString(log, -1)); n < 2 {
		t.Errorf("rollout stamped %d hashes, want the first one and at least one after an edit", n)
	}
	if !regexp.MustCompile(`reconciled app=demo/\w+ generation=[2-9]`).MatchString(log) {
		t.Error("no App edit was reconciled")
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=ERROR") && !strings.Contains(line, "failing on purpose") {
			t.Errorf("unexpected error: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", log)
	}
}

func TestInspect(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"inspect", "../../bin/plugins/app.wasm"}, &out, &out); err != nil {
		t.Fatalf("inspect: %v\n%s", err, &out)
	}
	for _, want := range []string{"ABI version:  1", "wasmrec_reconcile: (i32) -> (i64)", "wasmrec.patch: (i32, i32) -> (i64)",
		"for: demo.wasmrec.dev/v1, Kind=App", "patch demo.wasmrec.dev/apps/status"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect output lacks %q:\n%s", want, &out)
		}
	}
	out.Reset()
	err := run(context.Background(), []string{"inspect", "../../bin/testguests/abi7.wasm"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "plugin speaks ABI v7, host speaks v1") {
		t.Fatalf("inspect of an ABI v7 module: %v", err)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/host.yaml"
	if err := writeFile(path, "plugins:\n  - name: Bad_Name\n    module: x.wasm\n    surprise: 1\n"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "--config", path}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `unknown field "surprise"`) || !strings.Contains(err.Error(), "host.yaml") {
		t.Fatalf("run with a bad config: %v", err)
	}
	if err := writeFile(path, "plugins:\n  - name: Bad_Name\n    module: x.wasm\n"); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"run", "--config", path}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `name "Bad_Name": use lowercase letters`) {
		t.Fatalf("run with a bad name: %v", err)
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

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
