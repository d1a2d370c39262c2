package sdkproxy

import (
	"archive/zip"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/wasmrec/wasmrec/internal/release"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

func carried(t *testing.T) {
	t.Helper()
	if !Carried() {
		testenv.Missing(t, errors.New("internal/sdkproxy/modules holds no modules"), "sdk-modules")
	}
}

// The modules carried are the tree's: a binary built from a tree whose SDK changed since the
// modules were written would hand authors an old SDK under the same version.
func TestCarriedModulesAreTheTree(t *testing.T) {
	carried(t)
	for _, m := range Modules {
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			t.Fatal(err)
		}
		zipped, err := dirhash.HashZip(filepath.Join("modules", filepath.FromSlash(escaped), "@v", release.Version+".zip"), dirhash.Hash1)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join("..", "..", m.Dir)
		files, err := moduleFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		tree, err := dirhash.Hash1(prefixed(files, m.Path+"@"+release.Version+"/"), func(name string) (io.ReadCloser, error) {
			return os.Open(filepath.Join(dir, strings.TrimPrefix(name, m.Path+"@"+release.Version+"/")))
		})
		if err != nil {
			t.Fatal(err)
		}
		if zipped != tree {
			t.Errorf("%s: the carried zip is %s, the tree is %s: run make sdk-modules (make build does)", m.Path, zipped, tree)
		}
	}
}

func prefixed(names []string, prefix string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// A module's zip holds what its published version would: a file git ignores (a test binary left
// by go test -c) is left out, so the proxy written from a working tree is the one a clean checkout
// writes, and both fill a module cache alike.
func TestAZipLeavesOutWhatGitIgnores(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	writeFile := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(".gitignore", "*.test\n")
	writeFile("m/go.mod", "module example.com/m\n")
	writeFile("m/m.go", "package m\n")
	writeFile("m/new.go", "package m\n\nconst New = 1\n") // not yet committed: a developer's change
	writeFile("m/gone.go", "package m\n")
	writeFile("m/m.test", "a test binary")
	for _, args := range [][]string{{"init", "-q"}, {"add", ".gitignore", "m/go.mod", "m/m.go", "m/gone.go"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	if err := os.Remove(filepath.Join(dir, "m", "gone.go")); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	mv := module.Version{Path: "example.com/m", Version: "v0.1.0"}
	if err := writeModule(out, mv, filepath.Join(dir, "m")); err != nil {
		t.Fatal(err)
	}
	z, err := zip.OpenReader(filepath.Join(out, "example.com", "m", "@v", "v0.1.0.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	var names []string
	for _, f := range z.File {
		names = append(names, strings.TrimPrefix(f.Name, "example.com/m@v0.1.0/"))
	}
	slices.Sort(names)
	if want := []string{"go.mod", "m.go", "new.go"}; !slices.Equal(names, want) {
		t.Errorf("the zip holds %q, want %q", names, want)
	}
}

func TestEnv(t *testing.T) {
	carried(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	env, err := Env([]string{"HOME=/home/a", "GOPROXY=https://corp.example/proxy|direct", "GONOSUMDB=corp.example"})
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	proxy, rest, _ := strings.Cut(get("GOPROXY"), ",")
	if rest != "https://corp.example/proxy|direct" {
		t.Errorf("GOPROXY = %q: the user's proxies must follow the carried one", get("GOPROXY"))
	}
	dir, ok := strings.CutPrefix(proxy, "file://")
	if !ok {
		t.Fatalf("GOPROXY starts with %q, want a file:// proxy", proxy)
	}
	for _, m := range Modules {
		escaped, _ := module.EscapePath(m.Path)
		list, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(escaped), "@v", "list"))
		if err != nil || strings.TrimSpace(string(list)) != release.Version {
			t.Errorf("%s in the written proxy: list %q, %v", m.Path, list, err)
		}
	}
	if got, want := get("GONOSUMDB"), "corp.example,"+release.ABIModule+","+release.SDKModule; got != want {
		t.Errorf("GONOSUMDB = %q, want %q", got, want)
	}
	if get("HOME") != "/home/a" || len(env) != 3 {
		t.Errorf("env = %q: other variables must pass unchanged, each once", env)
	}

	// With no GOPROXY, the go command's default follows.
	env, err = Env(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(env, func(kv string) bool {
		return strings.HasPrefix(kv, "GOPROXY=file://") && strings.HasSuffix(kv, ",https://proxy.golang.org,direct")
	}) {
		t.Errorf("env = %q, want the default proxy after the carried one", env)
	}
}

// Commands started together write the proxy once and all find it whole.
func TestEnvConcurrent(t *testing.T) {
	carried(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	for i := range dirs {
		wg.Go(func() {
			env, err := Env(nil)
			if err != nil {
				t.Error(err)
				return
			}
			dirs[i] = env[0]
		})
	}
	wg.Wait()
	for _, d := range dirs[1:] {
		if d != dirs[0] {
			t.Fatalf("proxies differ: %q", dirs)
		}
	}
	parent := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "wasmrec", "goproxy")
	entries, err := os.ReadDir(parent)
	if err != nil || len(entries) != 1 {
		t.Fatalf("%s holds %v (%v), want the one proxy and no leftovers", parent, entries, err)
	}
}

// A module cache holding another build of the SDK at this version is named, with what to do;
// one holding the carried build, or none, is fine.
func TestStaleInCache(t *testing.T) {
	carried(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	gomodcache := t.TempDir()
	if err := StaleInCache(gomodcache); err != nil {
		t.Errorf("an empty cache: %v", err)
	}
	proxy, err := writeCache()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Modules {
		escaped, _ := module.EscapePath(m.Path)
		sum, err := dirhash.HashZip(filepath.Join(proxy, filepath.FromSlash(escaped), "@v", release.Version+".zip"), dirhash.Hash1)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path == release.SDKModule {
			sum = "h1:anotherbuildofthesameversionxxxxxxxxxxxxx="
		}
		dir := filepath.Join(gomodcache, "cache", "download", filepath.FromSlash(escaped), "@v")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, release.Version+".ziphash"), []byte(sum+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err = StaleInCache(gomodcache)
	if err == nil || !strings.Contains(err.Error(), release.SDKModule+"@"+release.Version+" with other contents") || strings.Contains(err.Error(), release.ABIModule+",") || !strings.Contains(err.Error(), "rm -rf") {
		t.Errorf("a stale SDK: %v", err)
	}
}

// DropStale removes this version of a module the cache holds with other contents, read-only as
// the go command leaves it, and leaves the rest of the cache: other versions, and a module that
// matches.
func TestDropStale(t *testing.T) {
	out := t.TempDir()
	if err := Write(out, filepath.Join("..", "..")); err != nil {
		t.Fatal(err)
	}
	gomodcache := t.TempDir()
	put := func(name, body string) {
		t.Helper()
		p := filepath.Join(gomodcache, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	var keep []string
	for _, m := range Modules {
		escaped, _ := module.EscapePath(m.Path)
		sum, err := dirhash.HashZip(filepath.Join(out, filepath.FromSlash(escaped), "@v", release.Version+".zip"), dirhash.Hash1)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path == release.SDKModule {
			sum = "h1:anotherbuildofthesameversionxxxxxxxxxxxxx="
		} else {
			keep = append(keep, escaped+"@"+release.Version+"/go.mod")
		}
		put("cache/download/"+escaped+"/@v/"+release.Version+".ziphash", sum+"\n")
		put("cache/download/"+escaped+"/@v/"+release.Version+".zip", "zip")
		put("cache/download/"+escaped+"/@v/v0.0.1.zip", "an older version")
		put(escaped+"@"+release.Version+"/go.mod", "module "+m.Path+"\n")
		put(escaped+"@"+release.Version+"/sub/x.go", "package sub\n")
		keep = append(keep, "cache/download/"+escaped+"/@v/v0.0.1.zip")
	}
	for _, m := range Modules { // read-only folders, as the go command leaves them
		escaped, _ := module.EscapePath(m.Path)
		for _, d := range []string{escaped + "@" + release.Version + "/sub", escaped + "@" + release.Version} {
			if err := os.Chmod(filepath.Join(gomodcache, filepath.FromSlash(d)), 0o555); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { // a failed removal must not fail TempDir's
		filepath.WalkDir(gomodcache, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	dropped, err := DropStale(gomodcache, out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dropped, []string{release.SDKModule}) {
		t.Fatalf("dropped %q, want only %s", dropped, release.SDKModule)
	}
	escaped, _ := module.EscapePath(release.SDKModule)
	for _, gone := range []string{escaped + "@" + release.Version, "cache/download/" + escaped + "/@v/" + release.Version + ".zip", "cache/download/" + escaped + "/@v/" + release.Version + ".ziphash"} {
		if _, err := os.Stat(filepath.Join(gomodcache, filepath.FromSlash(gone))); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	for _, k := range keep {
		if _, err := os.Stat(filepath.Join(gomodcache, filepath.FromSlash(k))); err != nil {
			t.Errorf("%s was removed: %v", k, err)
		}
	}
	if dropped, err := DropStale(gomodcache, out); err != nil || len(dropped) != 0 {
		t.Errorf("a second DropStale: %q, %v; want nothing", dropped, err)
	}
}
