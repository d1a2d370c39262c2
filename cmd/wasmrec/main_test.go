package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/host/controlplane"
	"github.com/wasmrec/wasmrec/internal/plugintest"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe to read while the command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// `wasmrec dev` (what `make run` runs) starts the control plane and runs the example plugins:
// app and app-c reconcile their Apps, rollout stamps a config hash when the web ConfigMap
// changes, failing fails with a growing attempt count. dev runs until all of that has been
// seen (a cold compile of the 16 MB rollout module can take a minute on a busy machine), then is
// interrupted and must stop cleanly.
func TestDev(t *testing.T) {
	if _, err := controlplane.FindBinDir("", controlplane.AllBinaries...); err != nil {
		testenv.Missing(t, err, "controlplane")
	}
	if _, err := os.Stat("../../bin/plugins/app.wasm"); err != nil {
		testenv.Missing(t, err, "plugins")
	}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--churn-interval", "1s", "--kubeconfig-out", t.TempDir() + "/kubeconfig",
			"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	wants := []string{
		`msg="plugin loaded" plugin=app `, `msg="plugin loaded" plugin=app-c `,
		`msg="plugin loaded" plugin=rollout `, `msg="plugin loaded" plugin=failing `,
		`failing on purpose (attempt 4 for demo/flaky)`,
	}
	// Churn may edit an App before its plugin has loaded (plugins join the running manager as
	// they load), so the first reconcile can be at any generation.
	reconciled := []*regexp.Regexp{
		regexp.MustCompile(`msg=reconciled plugin=app .* app=demo/frontend generation=\d+ port=8080\n`),
		regexp.MustCompile(`msg=reconciled plugin=app-c .* app=demo-c/frontend generation="?\d+"? port="?8080"?\n`),
	}
	seen := func(log string) bool {
		for _, w := range wants {
			if !strings.Contains(log, w) {
				return false
			}
		}
		for _, re := range reconciled {
			if !re.MatchString(log) {
				return false
			}
		}
		// rollout stamps a hash at start and another after churn edits web-config; churn edits
		// an App, which the app plugin reconciles at a new generation.
		return len(regexp.MustCompile(`msg="stamped a new config hash" plugin=rollout .* deployment=demo/web`).FindAllString(log, -1)) >= 2 &&
			regexp.MustCompile(`msg=reconciled plugin=app .* app=demo/\w+ generation=[2-9]`).MatchString(log)
	}
	deadline := time.After(4 * time.Minute)
wait:
	for !seen(stderr.String()) {
		select {
		case err := <-done:
			t.Fatalf("dev stopped early: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		case <-deadline:
			break wait
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The probes and the metrics, while dev runs.
	log := stderr.String()
	probes, metricsURL := address(log, "health probes"), address(log, "metrics")
	if body, code := get(t, probes+"/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("/readyz = %d %q, want 200 ok once caches synced and plugins loaded", code, body)
	}
	if _, code := get(t, probes+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	body, _ := get(t, metricsURL+"/metrics")
	for _, p := range []string{"app", "app-c", "rollout", "failing"} {
		if !regexp.MustCompile(`wasmrec_plugin_info\{digest="sha256:[0-9a-f]{64}",plugin="` + p + `"\} 1`).MatchString(body) {
			t.Errorf("/metrics lacks wasmrec_plugin_info for %s", p)
		}
	}
	if !regexp.MustCompile(`controller_runtime_reconcile_errors_total\{controller="failing"\} [1-9]`).MatchString(body) {
		t.Error("/metrics does not count the failing plugin's errors")
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("dev: %v", err)
	}
	out := stdout.String()
	log = stderr.String()
	if !strings.Contains(out, "control plane up at https://127.0.0.1:") {
		t.Errorf("stdout lacks the control plane's address:\n%s", out)
	}
	for _, w := range wants {
		if !strings.Contains(log, w) {
			t.Errorf("the log lacks %q", w)
		}
	}
	for _, re := range reconciled {
		if !re.MatchString(log) {
			t.Errorf("the log lacks a line matching %s", re)
		}
	}
	if !seen(log) {
		t.Error("rollout did not stamp a second hash, or no App edit was reconciled")
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

// address finds where the log says a server listens.
func address(log, name string) string {
	m := regexp.MustCompile(`msg="serving ` + name + `" address=(http://[0-9.:]+)`).FindStringSubmatch(log)
	if m == nil {
		return "http://no-address-logged"
	}
	return m[1]
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return "", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

func TestInspect(t *testing.T) {
	for _, m := range []string{"../../bin/plugins/app.wasm", "../../bin/testguests/abi7.wasm"} {
		if _, err := os.Stat(m); err != nil {
			testenv.Missing(t, err, "plugins testguests")
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"inspect", "../../bin/plugins/app.wasm"}, &out, &out); err != nil {
		t.Fatalf("inspect: %v\n%s", err, &out)
	}
	for _, want := range []string{"ABI version:  1", "wasmrec_reconcile: (i32) -> (i64)", "wasmrec.patch: (i32, i32) -> (i64)",
		"for: App.v1.demo.wasmrec.dev", "patch demo.wasmrec.dev/apps/status"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect output lacks %q:\n%s", want, &out)
		}
	}
	out.Reset()
	err := run(context.Background(), []string{"inspect", "../../bin/testguests/abi7.wasm"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "plugin speaks ABI v7, host speaks v1") {
		t.Fatalf("inspect of an ABI v7 module: %v", err)
	}
	if out.Len() > 0 {
		t.Errorf("inspect of a module the host refuses printed more than the error:\n%s", &out)
	}
	out.Reset()
	err = run(context.Background(), []string{"inspect", "-o", "yaml", "../../bin/plugins/app.wasm"}, &out, &out)
	if err != nil || !strings.Contains(out.String(), "abiVersion: 1") {
		t.Errorf("inspect -o yaml: %v\n%s", err, &out)
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

// inspect lists an import a module declares twice (Go's runtime and syscall both import
// fd_write) once, with the count.
func TestInspectListsAnImportOnce(t *testing.T) {
	got := once([]string{"a", "fd_write", "b", "fd_write"})
	want := []string{"a", "fd_write (imported 2 times)", "b"}
	if !slices.Equal(got, want) {
		t.Errorf("once: %q, want %q", got, want)
	}
}

// build and inspect refuse a module whose manifest watches a kind without asking to list and
// watch it, as the host refuses it at load.
func TestCheckModuleRefusesAWatchNotAskedFor(t *testing.T) {
	b, err := os.ReadFile("../../bin/testguests/noop.wasm")
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	_, err = checkModule(context.Background(), "noop.wasm", b, t.TempDir(), 0)
	if want := `plugin "noop": watching ConfigMap.v1 needs list core/configmaps, watch core/configmaps: the module's manifest does not ask for`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("checkModule: %v, want %q", err, want)
	}
}

// build, test and dev load a module with DIR/host.yaml's memory limit, as the host will: a
// Go guest whose initialisation needs more than the limit fails there, saying so, and loads
// under the default.
func TestCheckModuleTakesHostYAMLsMemoryLimit(t *testing.T) {
	b, err := os.ReadFile("../../bin/testguests/panic-go.wasm")
	if err != nil {
		testenv.Missing(t, err, "testguests")
	}
	dir := t.TempDir()
	hc := "plugins:\n  - name: panic-go\n    module: panic-go.wasm\n    memoryLimit: 3Mi\n"
	if err := os.WriteFile(filepath.Join(dir, "host.yaml"), []byte(hc), 0o644); err != nil {
		t.Fatal(err)
	}
	var o plugintest.Options
	if _, err := readGrant(dir, "", &o); err != nil || o.MemoryLimit != 3<<20 {
		t.Fatalf("readGrant: memory limit %d, %v; want 3 MiB", o.MemoryLimit, err)
	}
	_, err = checkModule(context.Background(), "panic-go.wasm", b, t.TempDir(), o.MemoryLimit)
	if want := "cannot allocate memory (the cap is 3 MiB an instance)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("checkModule under host.yaml's 3Mi: %v, want %q", err, want)
	}
	if _, err := checkModule(context.Background(), "panic-go.wasm", b, t.TempDir(), 0); err != nil {
		t.Fatalf("checkModule under the default limit: %v", err)
	}
}
