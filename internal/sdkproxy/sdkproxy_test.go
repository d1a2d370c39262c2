package sdkproxy

import (
	"errors"
	"os"
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
		tree, err := dirhash.HashDir(filepath.Join("..", "..", m.Dir), m.Path+"@"+release.Version, dirhash.Hash1)
		if err != nil {
			t.Fatal(err)
		}
		if zipped != tree {
			t.Errorf("%s: the carried zip is %s, the tree is %s: run make sdk-modules (make build does)", m.Path, zipped, tree)
		}
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
