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

// wasmrec test on a module built elsewhere: cases that pass, one that fails, a grant the
// module exceeds, a folder without tests.
func TestTestCommand(t *testing.T) {
	module, err := filepath.Abs("../../bin/plugins/app-c.wasm")
	if err == nil {
		_, err = os.Stat(module)
	}
	if err != nil {
		testenv.Missing(t, err, "plugins")
	}
	dir := t.TempDir()
	write := func(name, s string) string {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("tests/app.yaml", `cases:
  - name: applies a configmap
    before:
      - {apiVersion: demo.wasmrec.dev/v1, kind: App, metadata: {name: web, namespace: demo-c}, spec: {message: hi}}
    after:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: web, namespace: demo-c}, data: {message: hi}}
  - name: expects another message
    before:
      - {apiVersion: demo.wasmrec.dev/v1, kind: App, metadata: {name: web, namespace: demo-c}, spec: {message: hi}}
    after:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: web, namespace: demo-c}, data: {message: bye}}
`)
	ctx := context.Background()
	var out bytes.Buffer
	err = run(ctx, []string{"test", dir, "--module", module, "--compilation-cache", "-"}, &out, &out)
	if err == nil || err.Error() != "1 of 2 cases failed" {
		t.Errorf("err = %v, want 1 of 2 cases failed", err)
	}
	for _, want := range []string{
		"  ok    applies a configmap (",
		"  FAIL  expects another message (",
		`        after[0] v1 ConfigMap demo-c/web: data.message: want "bye", got "hi"`,
		"          info reconciled app=demo-c/web generation=1 port=80",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	err = run(ctx, []string{"test", filepath.Join(dir, "tests/app.yaml"), "--module", module, "--run", "^applies", "--compilation-cache", "-"}, &out, &out)
	if err != nil || !strings.Contains(out.String(), "1 case passed") || strings.Contains(out.String(), "another") {
		t.Errorf("--run: %v\n%s", err, out.String())
	}

	// host.yaml grants less than the manifest asks for: said once, with where the grant is.
	write("host.yaml", `plugins:
  - name: app-c
    module: app-c.wasm
    permissions:
      - {group: demo.wasmrec.dev, resources: [apps], verbs: [get, list, watch]}
`)
	err = run(ctx, []string{"test", dir, "--module", module, "--compilation-cache", "-"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "the host would refuse this plugin: the module asks for permissions it was not granted") || !strings.Contains(err.Error(), "(the grant: the permissions of "+filepath.Join(dir, "host.yaml")) {
		t.Errorf("a grant narrower than the manifest: %v", err)
	}

	empty := t.TempDir()
	err = run(ctx, []string{"test", empty, "--module", module}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "no test cases: "+filepath.Join(empty, "tests")+" holds no tests/*.yaml") {
		t.Errorf("a folder without tests: %v", err)
	}
}
