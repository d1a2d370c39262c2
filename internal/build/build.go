package build

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wasmrec/wasmrec/internal/crdgen"
	"github.com/wasmrec/wasmrec/internal/rbacgen"
	"github.com/wasmrec/wasmrec/internal/sdkproxy"
	"github.com/wasmrec/wasmrec/sdk"
)

// Lang is a plugin's language, as read from its folder.
type Lang string

const (
	Go Lang = "go"
	C  Lang = "c"
)

// Detect reads dir's language: Go if it holds go.mod, C if it holds .c files.
func Detect(dir string) (Lang, error) {
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return Go, nil
	}
	if cs, _ := filepath.Glob(filepath.Join(dir, "*.c")); len(cs) > 0 {
		return C, nil
	}
	if _, err := os.Stat(dir); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s holds neither go.mod nor .c files: run wasmrec build in a plugin's folder (wasmrec new makes one)", dir)
}

// Options tune Build.
type Options struct {
	// Out is the module's path; defaults to DIR/<folder name>.wasm.
	Out string
	// Log receives the commands run, if set.
	Log io.Writer
	// Warnings receives what the compiler printed on a build that succeeded, if set.
	Warnings io.Writer
	// UpToDate, if set, is told whether the module was left as it was: nothing it is built from
	// changed since it was built.
	UpToDate *bool
	// Optimize runs binaryen's wasm-opt -Oz on a Go module after the go command links it, when
	// wasm-opt is on PATH (Warnings is told when it is not): the module is about 8% smaller, at
	// about 10 s more a build (RATIONALE.md). It keeps the name section, so that a trap's stack
	// still names functions. A C module is optimized by clang.
	Optimize bool
	// Staged builds the module beside Out and renames it into place only if its bytes differ
	// from Out's, so that a watcher of Out sees one whole new module or none (wasmrec dev).
	Staged bool
	// Changed, if set, is told whether Out was written.
	Changed *bool
}

// staged is where a Staged build to out writes the module before it renames it to out.
func staged(out string) string { return out + ".building" }

// target is where the build writes the module: Out, or beside it for a Staged build.
func (o Options) target() string {
	if o.Staged {
		return staged(o.Out)
	}
	return o.Out
}

// DefaultOut is where Build writes dir's module by default.
func DefaultOut(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.Join(abs, filepath.Base(abs)+".wasm"), nil
}

// Build compiles the plugin in dir and returns the module's path. A failed build's error holds
// the compiler's output.
func Build(dir string, o Options) (string, error) {
	lang, err := Detect(dir)
	if err != nil {
		return "", err
	}
	if o.Out == "" {
		if o.Out, err = DefaultOut(dir); err != nil {
			return "", err
		}
	}
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return "", err
	}
	if o.UpToDate != nil {
		*o.UpToDate = false
	}
	if o.Changed != nil {
		*o.Changed = false
	}
	if o.Staged { // one left by a build cut short would count as an input
		_ = os.Remove(staged(o.Out))
		defer os.Remove(staged(o.Out))
	}
	switch lang {
	case Go:
		return o.Out, buildGo(dir, o)
	default:
		c := o
		c.Out = o.target()
		if err := buildC(dir, c); err != nil {
			return "", err
		}
		return o.Out, o.publish()
	}
}

// publish ends a build that wrote the module to its target: a Staged build's module is
// renamed to Out unless Out holds the same bytes already.
func (o Options) publish() error {
	changed := true
	if target := o.target(); target != o.Out {
		if old, err := os.ReadFile(o.Out); err == nil {
			if built, err := os.ReadFile(target); err == nil && bytes.Equal(old, built) {
				changed = false
			}
		}
		if changed {
			if err := os.Rename(target, o.Out); err != nil {
				return err
			}
		}
	}
	if o.Changed != nil {
		*o.Changed = changed
	}
	return nil
}

func buildGo(dir string, o Options) error {
	// A folder never tidied (wasmrec new ran where go was not installed): tidy it first, with the
	// Go SDK this binary carries, as new would have.
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); errors.Is(err, fs.ErrNotExist) {
		if err := Tidy(dir, o); err != nil {
			return err
		}
	}
	downloadCarried(dir)
	target := o.target()
	args := []string{"build", "-buildmode=c-shared", "-trimpath", "-o", target, "."}
	cmd, err := goCommand(dir, args...)
	if err != nil {
		return err
	}
	cmd.Env = append(cmd.Env, "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	env := goEnv(cmd)
	opt, optMissing := findOptimizer(o)
	if optMissing != "" {
		if w := cmp.Or(o.Warnings, o.Log); w != nil {
			fmt.Fprintf(w, "warning: %s\n", optMissing)
		}
	}
	// What the build does is part of its inputs: the optimizer, its version and its flags too.
	// Not where it writes: the stamp is kept per module path, and a Staged build writes beside.
	key := slices.Concat(args[:3], args[5:])
	if opt != nil {
		key = append(key, opt.identity...)
	}
	inputs, known := inputsOf(dir, o.Out, env, key, cmd.Env)
	if known && upToDate(o.Out, inputs) {
		if o.UpToDate != nil {
			*o.UpToDate = true
		}
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s is up to date: nothing it is built from changed since it was built\n", o.Out)
		}
		return nil
	}
	if err := checkCachedSDK(dir); err != nil {
		return err
	}
	// The plugin's own API types get their codec and deep copies first; what the generator
	// wrote is an input of the build.
	generated, err := Generate(dir, o)
	if err != nil {
		return err
	}
	if generated {
		inputs, known = inputsOf(dir, o.Out, env, key, cmd.Env)
	}
	if opt != nil {
		// Linked to a folder of its own, then optimized into place: a module cut short by either
		// step is never left at Out.
		lo := o
		lo.Out = target
		if err := linkAndOptimize(cmd, opt, dir, lo); err != nil {
			return err
		}
	} else {
		// The go command leaves an output whose build ID is current as it is, whatever else in
		// it changed: a module not as its last build wrote it (cut short, written over) goes
		// first.
		if !intact(target) {
			if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("removing %s to build it again: %w", target, err)
			}
		}
		if err := goAdvice(runTool(cmd, "GOOS=wasip1 GOARCH=wasm ", o), dir); err != nil {
			return err
		}
	}
	if err := o.publish(); err != nil {
		return err
	}
	if known {
		record(o.Out, inputs)
	}
	return nil
}

// Generate writes the codec and deep copies of the Go plugin's own API types in dir (package
// crdgen) and the permissions its kubebuilder RBAC markers ask for (package rbacgen), and
// reports whether a file changed.
func Generate(dir string, o Options) (changed bool, err error) {
	cmd, err := goCommand(dir)
	if err != nil {
		return false, err
	}
	files, err := crdgen.Generate(dir, cmd.Env)
	if err == nil {
		var rbac string
		var warnings []string
		rbac, warnings, err = rbacgen.Generate(dir)
		if rbac != "" {
			files = append(files, rbac)
		}
		if out := cmp.Or(o.Warnings, o.Log); out != nil {
			for _, w := range warnings {
				fmt.Fprintf(out, "warning: %s\n", w)
			}
		}
	}
	if o.Log != nil {
		for _, f := range files {
			fmt.Fprintf(o.Log, "generated %s\n", f)
		}
	}
	return len(files) > 0, err
}

// goEnv is what the go command build runs says of its environment (go env -json): its
// version, and the settings go env -w saved, which the process's environment does not show.
func goEnv(build *exec.Cmd) string {
	cmd := exec.Command(build.Path, "env", "-json")
	cmd.Dir, cmd.Env = build.Dir, build.Env
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	var env map[string]string
	if json.Unmarshal(out, &env) != nil {
		return ""
	}
	delete(env, "GOGCCFLAGS") // names a temporary folder of its own each time
	b, _ := json.Marshal(env) // its keys sorted
	return string(b)
}

// downloadCarried has the go command record the Go SDK's modules in the module cache whole,
// from the proxy this binary carries: a build or a tidy fetches only their go.mod and zip, and
// go list -m, go doc and gopls, run without that proxy, then ask the public proxy for the rest
// and fail (it does not serve them). It is best effort: a plugin that does not require them, or
// a binary that does not carry them, is left to the build to report.
func downloadCarried(dir string) {
	paths := make([]string, 0, len(sdkproxy.Modules))
	for _, m := range sdkproxy.Modules {
		paths = append(paths, m.Path)
	}
	for _, p := range paths {
		cmd, err := goCommand(dir, "mod", "download", p)
		if err != nil {
			return
		}
		_ = cmd.Run()
	}
}

// Tidy runs go mod tidy in a Go plugin's folder, as wasmrec new does after writing it, with the
// Go SDK this binary carries (package sdkproxy) offered to the go command.
func Tidy(dir string, o Options) error {
	if err := checkCachedSDK(dir); err != nil {
		return err
	}
	cmd, err := goCommand(dir, "mod", "tidy")
	if err != nil {
		return err
	}
	if err := goAdvice(runTool(cmd, "", o), dir); err != nil {
		return err
	}
	downloadCarried(dir)
	return nil
}

// checkCachedSDK refuses a module cache that holds another build of the Go SDK at the version
// this binary carries (sdkproxy.StaleInCache): the go command would use it without a word.
func checkCachedSDK(dir string) error {
	cmd, err := goCommand(dir, "env", "GOMODCACHE")
	if err != nil {
		return err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil // the go command's own run says what is wrong
	}
	return sdkproxy.StaleInCache(strings.TrimSpace(string(out)))
}

// goCommand is the go command with args, run in dir, with the environment that offers it the
// Go SDK this binary carries.
func goCommand(dir string, args ...string) (*exec.Cmd, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, errors.New("go is not on PATH: install Go 1.24 or later (https://go.dev/dl) to build Go plugins")
	}
	env, err := sdkproxy.Env(os.Environ())
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(gobin, args...)
	cmd.Dir, cmd.Env = dir, env
	return cmd, nil
}

// goAdvice adds what to do to a go command's failure to get the Go SDK.
func goAdvice(err error, dir string) error {
	var te *ToolError
	if !errors.As(err, &te) {
		return err
	}
	for _, m := range sdkproxy.Modules {
		if !strings.Contains(te.Output, m.Path) {
			continue
		}
		switch {
		case !sdkproxy.Carried():
			te.Advice = sdkproxy.ErrNotCarried.Error()
		case strings.Contains(te.Output, "missing go.sum entry"):
			te.Advice = fmt.Sprintf("go.sum lacks the Go SDK's checksums: remove %s and run wasmrec build again (it tidies a folder with no go.sum, with the SDK this wasmrec carries)", filepath.Join(dir, "go.sum"))
		case strings.Contains(te.Output, "checksum mismatch"):
			te.Advice = fmt.Sprintf("go.sum or the module cache holds another build of the Go SDK at the same version, from another wasmrec: remove %s and the SDK's folders from the module cache ($(go env GOMODCACHE)/github.com/wasmrec and cache/download/github.com/wasmrec), then run wasmrec build again", filepath.Join(dir, "go.sum"))
		}
		return err
	}
	return err
}

// WASI_SYSROOT, if set, is the wasi-libc sysroot; otherwise /usr/share/wasi-sysroot where it
// exists (LLVM's layout), else /usr (Debian's wasi-libc package).
func sysroot() string {
	if s := os.Getenv("WASI_SYSROOT"); s != "" {
		return s
	}
	if _, err := os.Stat("/usr/share/wasi-sysroot"); err == nil {
		return "/usr/share/wasi-sysroot"
	}
	return "/usr"
}

func buildC(dir string, o Options) error {
	clang := os.Getenv("CC")
	if clang == "" {
		clang = "clang"
	}
	clangPath, err := exec.LookPath(clang)
	if err != nil {
		return fmt.Errorf("%s is not on PATH: C plugins need clang, lld and wasi-libc (Debian and Ubuntu: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32)", clang)
	}
	sdkPath, err := sdkDir()
	if err != nil {
		return err
	}
	sources, err := filepath.Glob(filepath.Join(dir, "*.c"))
	if err != nil {
		return err
	}
	sources = append(sources, filepath.Join(sdkPath, "wasmrec.c"))
	objDir, err := os.MkdirTemp("", "wasmrec-build-c-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(objDir)
	// Compiled and linked in two steps: clang given -O2 when it links runs wasm-opt, if that is
	// on PATH, and wasm-opt drops the name section, so a trap's stack would name no function.
	// Optimized by LLVM alone, a module runs as fast (BenchmarkReconcile, benchc: the same ns/op
	// within the noise) and its code is about 3 KB larger.
	var objects []string
	for i, src := range sources {
		obj := filepath.Join(objDir, fmt.Sprintf("%d-%s.o", i, strings.TrimSuffix(filepath.Base(src), ".c")))
		if filepath.Dir(src) == filepath.Clean(dir) {
			src = filepath.Base(src)
		}
		cmd := exec.Command(clangPath, "--target=wasm32-wasi", "--sysroot="+sysroot(), "-O2", "-Wall", "-I", sdkPath, "-c", "-o", obj, src)
		cmd.Dir = dir
		if err := runTool(cmd, "", o); err != nil {
			return withCAdvice(err)
		}
		objects = append(objects, obj)
	}
	cmd := exec.Command(clangPath, append([]string{"--target=wasm32-wasi", "--sysroot=" + sysroot(), "-mexec-model=reactor", "-o", o.Out}, objects...)...)
	cmd.Dir = dir
	return withCAdvice(runTool(cmd, "", o))
}

// withCAdvice adds to a failed C compile or link what to install, when its output shows a
// missing part of the toolchain.
func withCAdvice(err error) error {
	var te *ToolError
	if errors.As(err, &te) {
		switch out := te.Output; {
		case strings.Contains(out, "'stdio.h' file not found") || strings.Contains(out, "'stdlib.h' file not found") || strings.Contains(out, "'string.h' file not found"):
			te.Advice = "wasi-libc is missing: install it (Debian and Ubuntu: apt-get install wasi-libc), or set WASI_SYSROOT to its sysroot"
		case strings.Contains(out, "libclang_rt.builtins-wasm32.a"):
			te.Advice = "the wasm32 compiler runtime is missing: install it (Debian and Ubuntu: apt-get install libclang-rt-dev-wasm32)"
		case strings.Contains(out, "unable to execute command") && strings.Contains(out, "wasm-ld"):
			te.Advice = "the wasm linker is missing: install lld (Debian and Ubuntu: apt-get install lld)"
		}
	}
	return err
}

// sdkDir writes the C SDK to the user's cache, once per SDK version.
func sdkDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(append(append([]byte{}, sdk.CHeader...), sdk.CSource...))
	dir := filepath.Join(cache, "wasmrec", "sdk-c", hex.EncodeToString(sum[:6]))
	if b, err := os.ReadFile(filepath.Join(dir, "wasmrec.c")); err == nil && bytes.Equal(b, sdk.CSource) {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing the C SDK: %w", err)
	}
	for name, b := range map[string][]byte{"wasmrec.h": sdk.CHeader, "wasmrec.c": sdk.CSource} {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return "", fmt.Errorf("writing the C SDK: %w", err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("writing the C SDK: %w", err)
		}
	}
	return dir, nil
}

// ToolError is a compiler that failed.
type ToolError struct {
	Command string
	Output  string
	// Advice says what to do, when the output shows a missing part of the toolchain.
	Advice string
	Err    error
}

func (e *ToolError) Error() string {
	s := fmt.Sprintf("%s failed (%v):\n%s", e.Command, e.Err, strings.TrimRight(e.Output, "\n"))
	if e.Advice != "" {
		s += "\n" + e.Advice
	}
	return s
}

func (e *ToolError) Unwrap() error { return e.Err }

func runTool(cmd *exec.Cmd, envPrefix string, o Options) error {
	line := envPrefix + filepath.Base(cmd.Path) + " " + strings.Join(cmd.Args[1:], " ")
	if o.Log != nil {
		fmt.Fprintf(o.Log, "(cd %s && %s)\n", cmd.Dir, line)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &ToolError{Command: line, Output: string(out), Err: err}
	}
	if len(out) > 0 && o.Warnings != nil {
		_, _ = o.Warnings.Write(out)
	}
	return nil
}
