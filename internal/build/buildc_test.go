package build

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A C plugin's module keeps its function names (the name section), so that a trap's stack names
// where it happened, whether or not wasm-opt is on PATH (clang runs it when it links with -O2,
// and it drops the names).
func TestCModuleNamesItsFunctions(t *testing.T) {
	if _, err := exec.LookPath("clang"); err != nil {
		t.Skip("clang is not on PATH (make test installs it)")
	}
	dir := filepath.Join(t.TempDir(), "trapc")
	writeFiles(t, dir, map[string]string{"trapc.c": `#include "wasmrec.h"

const char *wasmrec_plugin_manifest(void) {
  return "{\"name\":\"trapc\",\"for\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}}";
}

__attribute__((noinline)) static int explode_on_request(const wasmrec_request *req) {
  if (req->name[0] != 0) __builtin_trap();
  return 0;
}

wasmrec_result wasmrec_plugin_reconcile(const wasmrec_request *req) {
  wasmrec_result r = {0};
  explode_on_request(req);
  return r;
}
`})
	out, err := Build(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	module, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(module, []byte("\x04name")) || !bytes.Contains(module, []byte("explode_on_request")) {
		t.Errorf("%s has no name section naming explode_on_request: a trap in it would show no function names", out)
	}
}
