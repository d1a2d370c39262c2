package sdkproxy

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"

	"github.com/wasmrec/wasmrec/internal/release"
	"golang.org/x/mod/sumdb/dirhash"
)

// Modules are the modules a Go plugin requires, with their folders in this repository.
var Modules = []struct{ Path, Dir string }{
	{release.ABIModule, release.ABIDir},
	{release.SDKModule, release.SDKDir},
}

//go:embed all:modules
var embedded embed.FS

// Write writes the Modules at release.Version from the repository at root as a file-based module
// proxy in out: out/<module>/@v/{list,<version>.info,.mod,.zip}. Each module's folder in out is
// replaced; anything else in out is left alone.
func Write(out, root string) error {
	for _, m := range Modules {
		if err := writeModule(out, module.Version{Path: m.Path, Version: release.Version}, filepath.Join(root, m.Dir)); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
	}
	return nil
}

func writeModule(out string, mv module.Version, dir string) error {
	escaped, err := module.EscapePath(mv.Path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.RemoveAll(vdir); err != nil {
		return err
	}
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	// A fixed time: the same tree gives the same files, and so the same binary.
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{mv.Version, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(vdir, mv.Version+".zip"))
	if err != nil {
		return err
	}
	files, err := moduleFiles(dir)
	if err != nil {
		f.Close()
		return err
	}
	zfiles := make([]zip.File, len(files))
	for i, name := range files {
		zfiles[i] = dirFile{dir, name}
	}
	if err := zip.Create(f, mv, zfiles); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"list":               []byte(mv.Version + "\n"),
		mv.Version + ".info": info,
		mv.Version + ".mod":  gomod,
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// moduleFiles lists, slash-separated and relative to dir, the files of the module at dir that its
// published version holds. In a git work tree those are the files git tracks or would track: an
// ignored file (a test binary `go test -c` left, a built module) is not published, and a proxy
// written from a working tree holds what one written from a clean checkout does. Outside git,
// every file.
func moduleFiles(dir string) ([]string, error) {
	out, err := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".").Output()
	if err != nil {
		var files []string
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
			return err
		})
		return files, err
	}
	var files []string
	for _, name := range strings.Split(string(out), "\x00") {
		// --cached lists a tracked file deleted in the work tree too.
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name))); name == "" || err != nil {
			continue
		}
		files = append(files, name)
	}
	return files, nil
}

// dirFile is a file of a module's folder, as zip.Create takes it.
type dirFile struct{ dir, name string }

func (f dirFile) Path() string { return f.name }
func (f dirFile) Lstat() (fs.FileInfo, error) {
	return os.Lstat(filepath.Join(f.dir, filepath.FromSlash(f.name)))
}
func (f dirFile) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.dir, filepath.FromSlash(f.name)))
}

// Carried reports whether this binary carries the Modules (it was built by make).
func Carried() bool {
	for _, m := range Modules {
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			return false
		}
		if _, err := fs.Stat(embedded, path.Join("modules", escaped, "@v", release.Version+".zip")); err != nil {
			return false
		}
	}
	return true
}

// Env returns environ (KEY=VALUE pairs, as os.Environ gives them) for a go command that fetches
// the Modules from the proxy this binary carries: GOPROXY starts with that proxy, written under
// the user's cache directory, and GONOSUMDB names the Modules. The user's GOPROXY follows it, so
// every other module comes from where it always does. Without carried modules, environ is
// returned as it is.
func Env(environ []string) ([]string, error) {
	if !Carried() {
		return environ, nil
	}
	dir, err := writeCache()
	if err != nil {
		return nil, fmt.Errorf("writing the Go SDK's module proxy: %w", err)
	}
	goproxy, nosumdb := "https://proxy.golang.org,direct", ""
	env := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "GOPROXY":
			if v != "" {
				goproxy = v
			}
		case "GONOSUMDB":
			nosumdb = v
		default:
			env = append(env, kv)
		}
	}
	// file:// needs a slash-separated absolute path.
	proxy := "file://" + filepath.ToSlash(dir)
	if !strings.HasPrefix(proxy, "file:///") {
		proxy = "file:///" + strings.TrimPrefix(proxy, "file://")
	}
	// A comma: a module the file proxy does not have (any other) falls through to the next.
	goproxy = proxy + "," + goproxy
	for _, m := range Modules {
		nosumdb = strings.TrimPrefix(nosumdb+","+m.Path, ",")
	}
	return append(env, "GOPROXY="+goproxy, "GONOSUMDB="+nosumdb), nil
}

// writeCache writes the carried proxy to the user's cache, in a folder named by its contents, and
// returns that folder. It is written beside and renamed into place, so that concurrent wasmrec
// commands never see half of it.
func writeCache() (string, error) {
	sum := sha256.New()
	var files []string
	err := fs.WalkDir(embedded, "modules", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, "/@v/") {
			return err
		}
		b, err := embedded.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, p)
		fmt.Fprintf(sum, "%s %d\n", p, len(b))
		sum.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	parent := filepath.Join(cache, "wasmrec", "goproxy")
	dir := filepath.Join(parent, release.Version+"-"+hex.EncodeToString(sum.Sum(nil)[:6]))
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, ".new-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, p := range files {
		b, err := embedded.ReadFile(p)
		if err != nil {
			return "", err
		}
		to := filepath.Join(tmp, filepath.FromSlash(strings.TrimPrefix(p, "modules/")))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another wasmrec wrote the same folder first.
		if _, statErr := os.Stat(dir); statErr == nil {
			return dir, nil
		}
		return "", err
	}
	return dir, nil
}

// ErrNotCarried explains a go command that could not fetch the Modules from a binary that
// carries none.
var ErrNotCarried = errors.New("this wasmrec binary does not carry the Go SDK, and no module proxy it can reach has " +
	release.SDKModule + "@" + release.Version + ": build wasmrec with `make build` or `make install` in a clone of its repository (they embed the SDK)")

// StaleInCache reports the Modules that the module cache at gomodcache holds at release.Version
// with other contents than this binary carries: written there by another wasmrec binary of the
// same version, built from another tree. The go command would use them as they are, and a plugin
// would build against an SDK other than the one its wasmrec documents. It says what to do.
func StaleInCache(gomodcache string) error {
	if !Carried() || gomodcache == "" {
		return nil
	}
	proxy, err := writeCache()
	if err != nil {
		return err
	}
	stale, err := staleIn(gomodcache, proxy)
	if err != nil || len(stale) == 0 {
		return err
	}
	root := filepath.Join(gomodcache, "github.com", "wasmrec")
	return fmt.Errorf("the module cache (%s) holds %s@%s with other contents than this wasmrec carries (another wasmrec binary of the same version, built from another tree, put it there): remove it with `chmod -R u+w %s && rm -rf %s %s`, remove the plugin's go.sum, and run the command again",
		gomodcache, strings.Join(stale, ", "), release.Version, root, root, filepath.Join(gomodcache, "cache", "download", "github.com", "wasmrec"))
}

// DropStale removes from the module cache at gomodcache the Modules it holds at release.Version
// with other contents than the proxy folder out (as Write wrote it), and returns their paths. The
// version is this tree's own: its contents are whatever the tree holds, and a tree whose SDK
// changed since the cache was filled would otherwise meet StaleInCache's error in every build.
// The go command's index of the packages of a module in the module cache is kept by the
// module's path alone, and is not removed: a change of the modules' imports needs a new version
// or `go clean -cache`.
func DropStale(gomodcache, out string) ([]string, error) {
	stale, err := staleIn(gomodcache, out)
	if err != nil {
		return nil, err
	}
	for _, p := range stale {
		escaped, err := module.EscapePath(p)
		if err != nil {
			return nil, err
		}
		extracted := filepath.Join(gomodcache, filepath.FromSlash(escaped)+"@"+release.Version)
		// The go command leaves what it extracts read-only.
		_ = filepath.WalkDir(extracted, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(extracted); err != nil {
			return nil, err
		}
		downloads, err := filepath.Glob(filepath.Join(gomodcache, "cache", "download", filepath.FromSlash(escaped), "@v", release.Version+".*"))
		if err != nil {
			return nil, err
		}
		for _, f := range downloads {
			if err := os.Remove(f); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}

// staleIn returns the Modules that the module cache at gomodcache holds at release.Version with
// other contents than the proxy folder proxy.
func staleIn(gomodcache, proxy string) ([]string, error) {
	var stale []string
	for _, m := range Modules {
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			return nil, err
		}
		cached, err := os.ReadFile(filepath.Join(gomodcache, "cache", "download", filepath.FromSlash(escaped), "@v", release.Version+".ziphash"))
		if err != nil {
			continue // not in the cache: the go command fetches the carried one
		}
		carried, err := dirhash.HashZip(filepath.Join(proxy, filepath.FromSlash(escaped), "@v", release.Version+".zip"), dirhash.Hash1)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(string(cached)) != carried {
			stale = append(stale, m.Path)
		}
	}
	return stale, nil
}
