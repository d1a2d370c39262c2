package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// PluginModule copies the Go module in the folder src (a test's testdata) to a temporary
// folder, with abi and sdk/go taken from this tree (replace directives added to its go.mod),
// and returns the copy's folder.
func PluginModule(t testing.TB, src string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	f, err := os.OpenFile(filepath.Join(dir, "go.mod"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\nreplace github.com/wasmrec/wasmrec/sdk/go => " + filepath.Join(root, "sdk", "go") + "\n\nreplace github.com/wasmrec/wasmrec/abi => " + filepath.Join(root, "abi") + "\n"); err != nil {
		t.Fatal(err)
	}
	return dir
}
