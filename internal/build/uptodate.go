package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/modfile"
)

// A Go build's stamp records what it was built from, so that a build of the same inputs to the
// same file (wasmrec test, then wasmrec build) is not linked again: the go command caches
// compiled packages, but links every time, seconds for a module with large dependencies.
//
// The inputs are every file in the plugin's folder but the module itself and .git (and every
// file in the folders its go.mod replaces a module with), all that go env says, the build's
// arguments and this binary's own build. A build under a go.work is never skipped: what the
// workspace brings in is not read here.
type stamp struct {
	Inputs string `json:"inputs"` // sha256 of the inputs
	Output string `json:"output"` // sha256 of the module written
}

// stampPath is where the stamp of a build to out is kept: in the user's cache, not beside the
// module, so that the plugin's folder holds nothing it did not ask for.
func stampPath(out string) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(out))
	return filepath.Join(cache, "wasmrec", "builds", hex.EncodeToString(sum[:12])+".json")
}

// inputsOf hashes what a Go build of dir to out with args reads, goEnv being what go env says.
// ok is false where it cannot tell (a workspace, an unreadable go.mod): the build then runs.
func inputsOf(dir, out, goEnv string, args, env []string) (sum string, ok bool) {
	if workspace(dir) {
		return "", false
	}
	h := sha256.New()
	write := func(parts ...string) {
		for _, p := range parts {
			io.WriteString(h, p)
			h.Write([]byte{0})
		}
	}
	write(goEnv)
	write(args...)
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); strings.HasPrefix(k, "GO") || strings.HasPrefix(k, "CGO") {
			write(e)
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		write(bi.Main.Version)
		for _, s := range bi.Settings {
			write(s.Key, s.Value)
		}
	}
	dirs := []string{dir}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", false
	}
	mf, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		return "", false
	}
	for _, r := range mf.Replace {
		if modfile.IsDirectoryPath(r.New.Path) {
			p := r.New.Path
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			dirs = append(dirs, p)
		}
	}
	for _, d := range dirs {
		if !hashTree(h, d, out) {
			return "", false
		}
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// hashTree writes every file under root but skip and .git into h: its path and its bytes.
// Hidden folders and other modules count: go:embed may name them.
func hashTree(h io.Writer, root, skip string) bool {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if abs, _ := filepath.Abs(path); abs == skip {
			return nil // the module itself is the output
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		io.WriteString(h, path)
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
		return nil
	})
	return err == nil
}

// workspace reports whether a go.work applies to dir.
func workspace(dir string) bool {
	if w := os.Getenv("GOWORK"); w != "" {
		return w != "off"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return true
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return true
		}
		if filepath.Dir(d) == d {
			return false
		}
	}
}

// intact reports whether out is what the last build recorded wrote to it.
func intact(out string) bool {
	s, ok := readStamp(out)
	if !ok {
		return false
	}
	sum, err := fileSum(out)
	return err == nil && sum == s.Output
}

func readStamp(out string) (stamp, bool) {
	b, err := os.ReadFile(stampPath(out))
	if err != nil {
		return stamp{}, false
	}
	var s stamp
	if json.Unmarshal(b, &s) != nil {
		return stamp{}, false
	}
	return s, true
}

// upToDate reports whether out holds what a build of inputs wrote last.
func upToDate(out, inputs string) bool {
	s, ok := readStamp(out)
	return ok && s.Inputs == inputs && intact(out)
}

// record writes the stamp of a build of inputs to out. A stamp that cannot be written only
// costs the next build its skip.
func record(out, inputs string) {
	sum, err := fileSum(out)
	if err != nil {
		return
	}
	b, _ := json.Marshal(stamp{Inputs: inputs, Output: sum})
	path := stampPath(out)
	if os.MkdirAll(filepath.Dir(path), 0o755) != nil {
		return
	}
	tmp := path + ".tmp"
	if os.WriteFile(tmp, b, 0o644) != nil {
		return
	}
	_ = os.Rename(tmp, path)
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
