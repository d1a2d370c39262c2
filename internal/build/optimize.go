package build

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// wasmOptFlags are what wasm-opt is given for a Go module: -Oz, the passes that shrink code most
// (-Os and -O2 leave the CronJob tutorial's module at 5.2 and 5.4 MB, -Oz at 4.95, from 5.39);
// -g, so that the name section stays; and the features the go command's output uses (GOWASM's
// satconv and signext, with bulk memory and mutable globals, which wazero runs), so that
// binaryen reads it and writes nothing a host does not run.
var wasmOptFlags = []string{"-Oz", "-g", "--enable-sign-ext", "--enable-nontrapping-float-to-int", "--enable-bulk-memory", "--enable-mutable-globals"}

// optimizer is wasm-opt as a build runs it.
type optimizer struct {
	path string
	// identity is what a build's inputs record of it: its version and flags.
	identity []string
}

// findOptimizer is the optimizer o asks for, or nil; missing, when o asks for one and wasm-opt
// cannot run, says so and what to do.
func findOptimizer(o Options) (opt *optimizer, missing string) {
	if !o.Optimize {
		return nil, ""
	}
	const install = "install binaryen (Debian and Ubuntu: apt-get install binaryen), or build without --optimize"
	path, err := exec.LookPath("wasm-opt")
	if err != nil {
		return nil, "wasm-opt is not on PATH: the module is not optimized (it is about 8% larger, and so is the code the host compiles from it); " + install
	}
	version, err := exec.Command(path, "--version").Output()
	if err != nil {
		return nil, fmt.Sprintf("%s --version failed (%v): the module is not optimized; %s", path, err, install)
	}
	return &optimizer{path: path, identity: append([]string{"wasm-opt", strings.TrimSpace(string(version))}, wasmOptFlags...)}, ""
}

// linkAndOptimize runs the go build cmd (its -o is o.Out) into a temporary folder, then
// wasm-opt from there into o.Out.
func linkAndOptimize(cmd *exec.Cmd, opt *optimizer, dir string, o Options) error {
	linkDir, err := os.MkdirTemp("", "wasmrec-link-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(linkDir)
	linked := filepath.Join(linkDir, filepath.Base(o.Out))
	for i, a := range cmd.Args {
		if a == "-o" {
			cmd.Args[i+1] = linked
			break
		}
	}
	if err := goAdvice(runTool(cmd, "GOOS=wasip1 GOARCH=wasm ", o), dir); err != nil {
		return err
	}
	return opt.run(linked, o.Out, dir, o)
}

// run optimizes the module in into out, through a temporary file beside out that then
// replaces it.
func (opt *optimizer) run(in, out, dir string, o Options) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	// The mode of the module optimized, not CreateTemp's 0600.
	if fi, err := os.Stat(in); err == nil {
		if err := os.Chmod(tmp.Name(), fi.Mode().Perm()); err != nil {
			return err
		}
	}
	wasmOpt := exec.Command(opt.path, append(append([]string{}, wasmOptFlags...), in, "-o", tmp.Name())...)
	wasmOpt.Dir = dir
	if err := runTool(wasmOpt, "", o); err != nil {
		var te *ToolError
		if errors.As(err, &te) {
			te.Advice = "wasm-opt could not optimize what the go command linked: build with --optimize=false to skip it, and report the module and wasm-opt's version"
		}
		return err
	}
	return os.Rename(tmp.Name(), out)
}
