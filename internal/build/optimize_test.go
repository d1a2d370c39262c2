package build

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// customSections lists the names of a module's custom sections.
func customSections(t *testing.T, b []byte) []string {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("not a wasm module: % x", b[:min(8, len(b))])
	}
	uleb := func(i int) (uint64, int) {
		var v uint64
		for shift := 0; ; shift += 7 {
			c := b[i]
			i++
			v |= uint64(c&0x7f) << shift
			if c < 0x80 {
				return v, i
			}
		}
	}
	var names []string
	for i := 8; i < len(b); {
		id := b[i]
		n, j := uleb(i + 1)
		if id == 0 {
			l, k := uleb(j)
			names = append(names, string(b[k:k+int(l)]))
		}
		i = j + int(n)
	}
	return names
}

// A Go module built with Optimize is wasm-opt's output: smaller than the go command's, its name
// section kept, its mode the go command's. Building it again with nothing changed does nothing;
// without Optimize it is built again; with no wasm-opt on PATH the build says so and goes on.
func TestAGoBuildIsOptimized(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command and wasm-opt")
	}
	if _, err := exec.LookPath("wasm-opt"); err != nil {
		testenv.Missing(t, err, "binaryen")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module p\n\ngo 1.24\n",
		"go.sum": "",
		// Enough code that -Oz has something to take: fmt and strconv.
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"strconv\"\n)\n\nfunc main() { fmt.Println(strconv.Quote(os.Args[0])) }\n",
	})
	var log, warnings strings.Builder
	out, err := Build(dir, Options{Log: &log, Warnings: &warnings, Optimize: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "wasm-opt -Oz -g ") {
		t.Errorf("the build ran no wasm-opt -Oz -g:\n%s", log.String())
	}
	optimized, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if sections := customSections(t, optimized); !strings.Contains(strings.Join(sections, " "), "name") {
		t.Errorf("the optimized module's custom sections are %q: the name section is gone", sections)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm()&0o044 == 0 {
		t.Errorf("the optimized module's mode is %v: not readable as the go command's output is", fi.Mode())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(leftovers) > 0 {
		t.Errorf("the build left %v in the plugin's folder", leftovers)
	}

	log.Reset()
	var upToDate bool
	if _, err := Build(dir, Options{Log: &log, Optimize: true, UpToDate: &upToDate}); err != nil {
		t.Fatal(err)
	}
	if !upToDate || strings.Contains(log.String(), "wasm-opt") {
		t.Errorf("a second optimized build of unchanged inputs ran again:\n%s", log.String())
	}

	if _, err := Build(dir, Options{UpToDate: &upToDate}); err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if upToDate || len(plain) <= len(optimized) {
		t.Errorf("built without Optimize (up to date: %v): %d bytes, optimized %d; want it built again, larger", upToDate, len(plain), len(optimized))
	}

	// No wasm-opt on PATH: the go command alone, and a warning that says what to do.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(gobin))
	warnings.Reset()
	if _, err := Build(dir, Options{Warnings: &warnings, Optimize: true}); err != nil {
		t.Fatal(err)
	}
	if w := warnings.String(); !strings.Contains(w, "wasm-opt is not on PATH") || !strings.Contains(w, "apt-get install binaryen") || !strings.Contains(w, "without --optimize") {
		t.Errorf("without wasm-opt, the warning is %q", w)
	}
}
