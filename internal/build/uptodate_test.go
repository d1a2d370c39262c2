package build

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The inputs' hash follows every file of the folder (hidden ones and other modules too: go:embed
// may name them) and of a folder its go.mod replaces a module with, what go env says and the
// build's arguments; not the module it writes.
func TestInputsFollowWhatABuildReads(t *testing.T) {
	root := t.TempDir()
	dir, lib := filepath.Join(root, "p"), filepath.Join(root, "lib")
	writeFiles(t, dir, map[string]string{
		"go.mod":  "module p\n\ngo 1.24\n\nrequire lib v0.0.0\n\nreplace lib => ../lib\n",
		"main.go": "package main\n\nfunc main() {}\n",
		"p.wasm":  "old output",
	})
	writeFiles(t, lib, map[string]string{"go.mod": "module lib\n", "lib.go": "package lib\n"})
	out := filepath.Join(dir, "p.wasm")
	args := []string{"build", "-o", out, "."}
	sum := func() string {
		t.Helper()
		s, ok := inputsOf(dir, out, "go1.26", args, []string{"GOOS=wasip1", "HOME=/x"})
		if !ok {
			t.Fatal("inputs not known")
		}
		return s
	}
	first := sum()
	if sum() != first {
		t.Fatal("the same inputs hash apart")
	}
	writeFiles(t, dir, map[string]string{"p.wasm": "new output"})
	if sum() != first {
		t.Error("the module the build writes changed its inputs")
	}
	writeFiles(t, dir, map[string]string{".data/msg.txt": "embedded"})
	if sum() == first {
		t.Error("a file in a hidden folder (go:embed may name it) left the inputs as they were")
	}
	writeFiles(t, dir, map[string]string{"child.wasm": "embedded"})
	if sum() == first {
		t.Error("another module in the folder (go:embed may name it) left the inputs as they were")
	}
	first = sum()
	writeFiles(t, lib, map[string]string{"lib.go": "package lib\n\nconst X = 1\n"})
	second := sum()
	if second == first {
		t.Error("a change in the replaced module's folder left the inputs as they were")
	}
	writeFiles(t, dir, map[string]string{"main.go": "package main\n\nfunc main() { _ = 1 }\n"})
	if sum() == second {
		t.Error("a change of main.go left the inputs as they were")
	}
	third := sum()
	if s, _ := inputsOf(dir, out, "go1.27", args, []string{"GOOS=wasip1", "HOME=/x"}); s == third {
		t.Error("another go env (a version, a GOFLAGS saved with go env -w) left the inputs as they were")
	}
	if s, _ := inputsOf(dir, out, "go1.26", append(args, "-race"), []string{"GOOS=wasip1", "HOME=/x"}); s == third {
		t.Error("other arguments left the inputs as they were")
	}
	writeFiles(t, root, map[string]string{"go.work": "go 1.24\n\nuse ./p\n"})
	if _, ok := inputsOf(dir, out, "go1.26", args, nil); ok {
		t.Error("a folder under a go.work had its inputs known")
	}
}

// A stamp holds while the module it was written for is unchanged.
func TestAStampHoldsForTheModuleItWasWrittenFor(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out := filepath.Join(t.TempDir(), "p.wasm")
	writeFiles(t, filepath.Dir(out), map[string]string{"p.wasm": "module"})
	if upToDate(out, "inputs") {
		t.Fatal("up to date with no stamp")
	}
	record(out, "inputs")
	if !upToDate(out, "inputs") {
		t.Fatal("not up to date right after its stamp was written")
	}
	if upToDate(out, "other inputs") {
		t.Error("up to date for other inputs")
	}
	writeFiles(t, filepath.Dir(out), map[string]string{"p.wasm": "another module"})
	if upToDate(out, "inputs") {
		t.Error("up to date though the module was written over")
	}
}

// A Go plugin built twice with nothing changed is linked once; a change of its source builds it
// again.
func TestABuildOfUnchangedInputsIsNotLinkedAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":  "module p\n\ngo 1.24\n",
		"go.sum":  "",
		"main.go": "package main\n\nfunc main() {}\n",
	})
	var log strings.Builder
	out, err := Build(dir, Options{Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	built, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	log.Reset()
	if _, err := Build(dir, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "is up to date") || strings.Contains(log.String(), "go build") {
		t.Errorf("the second build of unchanged inputs: %q; want it up to date, with no go build", log.String())
	}
	if again, _ := os.Stat(out); !again.ModTime().Equal(built.ModTime()) {
		t.Error("the module was written again")
	}
	time.Sleep(10 * time.Millisecond)
	writeFiles(t, dir, map[string]string{"main.go": "package main\n\nfunc main() { println() }\n"})
	log.Reset()
	if _, err := Build(dir, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "go build") {
		t.Errorf("a changed source was not built again: %q", log.String())
	}

	// A module written over in its middle keeps its build ID, which is all the go command looks
	// at: it must be built again all the same, and come out as it was.
	good, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(good)
	copy(bad[len(bad)/2:], "written over")
	writeFiles(t, dir, map[string]string{filepath.Base(out): string(bad)})
	var upToDate bool
	if _, err := Build(dir, Options{UpToDate: &upToDate}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(out); upToDate || !bytes.Equal(again, good) {
		t.Errorf("a module written over was left as it was (up to date: %v)", upToDate)
	}
	writeFiles(t, dir, map[string]string{filepath.Base(out): "garbage"})
	if _, err := Build(dir, Options{}); err != nil {
		t.Errorf("a module replaced by garbage: %v; want it built again", err)
	}
}

// A Staged build (wasmrec dev's) writes the module beside its place and renames it there, and
// a build to that place then (wasmrec test's) finds it up to date; a Staged build whose module
// comes out the same leaves the one there as it is.
func TestAStagedBuildIsUpToDateForItsPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":  "module p\n\ngo 1.24\n",
		"go.sum":  "",
		"main.go": "package main\n\nfunc main() {}\n",
	})
	out, err := DefaultOut(dir)
	if err != nil {
		t.Fatal(err)
	}
	stage := func(wantChanged bool) {
		t.Helper()
		var changed, upToDate bool
		if _, err := Build(dir, Options{Staged: true, Changed: &changed}); err != nil {
			t.Fatal(err)
		}
		if changed != wantChanged {
			t.Errorf("changed %v, want %v", changed, wantChanged)
		}
		if _, err := os.Stat(staged(out)); !os.IsNotExist(err) {
			t.Errorf("the staged module is still there: %v", err)
		}
		if _, err := Build(dir, Options{UpToDate: &upToDate}); err != nil {
			t.Fatal(err)
		}
		if !upToDate {
			t.Error("the module a Staged build put in place was built again")
		}
	}
	stage(true)
	first, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	// Another file in the folder: the same module comes out, and the one in place stays.
	writeFiles(t, dir, map[string]string{"notes.txt": "x"})
	stage(false)
	if again, _ := os.Stat(out); !again.ModTime().Equal(first.ModTime()) {
		t.Error("a module of the same bytes was written over")
	}
	writeFiles(t, dir, map[string]string{"main.go": "package main\n\nfunc main() { println() }\n"})
	stage(true)
}
