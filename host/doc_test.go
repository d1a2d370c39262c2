package host_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// packages lists the Go packages under root/dir, as paths from root: the folders holding a
// .go file other than a test, testdata and nested modules left out.
func packages(t *testing.T, root, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		if rel != dir {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		gos, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, g := range gos {
			if !strings.HasSuffix(g, "_test.go") {
				out = append(out, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every package under host/, internal/ and sdk/go has a doc.go saying what it is for, is named
// in README.md's package table, and, under host/, in host/doc.go's list.
func TestEveryPackageIsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(readme)
	if i := strings.Index(table, "| package | its one job |"); i >= 0 {
		table = table[i:]
		if j := strings.Index(table, "\n\n"); j >= 0 {
			table = table[:j]
		}
	} else {
		t.Fatal("README.md has no package table (| package | its one job |)")
	}
	hostDoc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, dir := range []string{"host", "internal", "sdk/go"} {
		all = append(all, packages(t, "..", dir)...)
	}
	if len(all) < 40 {
		t.Fatalf("found %d packages: %v; the walk is wrong", len(all), all)
	}
	for _, pkg := range all {
		if pkg == "host" {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", pkg, "doc.go")); err != nil {
			t.Errorf("%s has no doc.go: say there what the package is for", pkg)
		}
		if strings.HasPrefix(pkg, "sdk/go/k8s/") { // the generated types: one row for them all
			if !strings.Contains(table, "`sdk/go/k8s/...`") {
				t.Errorf("%s: README.md's package table has no row `sdk/go/k8s/...`", pkg)
			}
			continue
		}
		if !strings.Contains(table, "`"+pkg+"`") {
			t.Errorf("%s is missing from README.md's package table: add a row `%s` | its one job", pkg, pkg)
		}
		if rel, ok := strings.CutPrefix(pkg, "host/"); ok {
			if !regexp.MustCompile(`(?m)^//   - .*\b` + regexp.QuoteMeta(rel) + `\b[,:]`).Match(hostDoc) {
				t.Errorf("%s is missing from host/doc.go's list of subpackages", pkg)
			}
		}
	}
}
