package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/internal/build"
	"github.com/wasmrec/wasmrec/internal/kinds"
	"github.com/wasmrec/wasmrec/internal/plugintest"
)

func newBuildCommand(stdout, stderr io.Writer) *cobra.Command {
	var out, cacheDir string
	var verbose int
	var optimize bool
	cmd := &cobra.Command{
		Use:   "build [DIR]",
		Short: "Build a plugin's folder to a module and check it as the host will",
		Long: `build compiles the plugin in DIR (default the working directory) to the module file DIR/host.yaml
names, as wasmrec dev and run read it, or else DIR/<folder name>.wasm:
a Go plugin (DIR holds go.mod) with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath,
and with --optimize then binaryen's wasm-opt -Oz -g (the module is about 8% smaller; without
wasm-opt on PATH, build says so and goes on), a C plugin (DIR holds .c files) with clang --target=wasm32-wasi -mexec-model=reactor, wasi-libc
and the C SDK that comes with wasmrec. It then checks the module as the host does at load (ABI,
exports, imports, manifest; its initialisation under DIR/host.yaml's memoryLimit, if it sets one)
and prints what it found.

Before compiling a Go plugin it generates, as controller-gen would: zz_generated.wasmrec.go (the
codec and deep copies) in each package of API types marked +kubebuilder:object:root or
:generate, and zz_generated.wasmrec_rbac.go in the main package from the module's
+kubebuilder:rbac markers, whose permissions join the manifest's (docs/plugin-authors.md).`,
		Example: `  # Build the plugin in the working directory:
  wasmrec build

  # Build another folder, to a chosen file, showing the compiler's command line:
  wasmrec build ./hello --out /tmp/hello.wasm -v 1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			var upToDate bool
			if out == "" {
				var err error
				if out, err = folderModule(dir); err != nil {
					return err
				}
			}
			o := build.Options{Out: out, Warnings: stderr, UpToDate: &upToDate, Optimize: optimize}
			if verbose > 0 {
				o.Log = stderr
			}
			path, err := build.Build(dir, o)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			// As wasmrec test and dev run it: with DIR/host.yaml's grant and memory limit.
			var grant plugintest.Options
			grantFrom, grantErr := readGrant(dir, "", &grant)
			in, err := checkModule(cmd.Context(), path, b, cacheDir, grant.MemoryLimit)
			if err == nil {
				err = checkFolderKinds(dir, in.Manifest)
			}
			if err != nil {
				return fmt.Errorf("built %s, but it is not a usable plugin: %w", path, err)
			}
			verb := "built"
			if upToDate {
				verb = "up to date:"
			}
			if _, err := fmt.Fprintf(stdout, "%s %s (%s, ABI v%d): plugin %q reconciles %s\n", verb, path, sizeString(in.Size), in.ABIVersion, in.Manifest.Name, kinds.String(in.Manifest.For.APIVersion, in.Manifest.For.Kind)); err != nil {
				return err
			}
			if grantErr == nil {
				warnGrant(stderr, grantFrom, grant.Grant, in.Manifest)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the module file to write (default the one DIR/host.yaml names, else DIR/<folder name>.wasm)")
	cmd.Flags().IntVarP(&verbose, "verbose", "v", 0, "1 prints the compiler's command line")
	cmd.Flags().BoolVar(&optimize, "optimize", false, "run binaryen's wasm-opt -Oz -g on a Go module after linking it: about 8% smaller, about 10 s more")
	cmd.Flags().StringVar(&cacheDir, "compilation-cache", "", `directory for compiled modules ("-" for none)`)
	return cmd
}

// folderModule is where the module of the plugin folder dir goes: the module file dir/host.yaml
// names, if it holds one plugin whose module is a file, as wasmrec dev and run read it; else
// build's default, dir/<folder name>.wasm. A copied folder's host.yaml keeps the old folder's
// file name, and build, test and dev must all write the file the host runs.
func folderModule(dir string) (string, error) {
	hostYAML := filepath.Join(dir, "host.yaml")
	if _, err := os.Stat(hostYAML); err == nil {
		hc, err := plugin.LoadHostConfig(hostYAML)
		if err == nil && len(hc.Plugins) == 1 && !strings.HasPrefix(hc.Plugins[0].Module, "oci:") {
			return filepath.Abs(hc.Plugins[0].Module)
		}
	}
	return build.DefaultOut(dir)
}

func sizeString(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// checkFolderKinds checks the kinds m watches of the groups DIR/crds/*.yaml define against those
// CRDs: a kind they do not serve is most likely misspelt, and would wait for ever on a cluster.
func checkFolderKinds(dir string, m *abi.Manifest) error {
	crds, err := folderCRDs(dir)
	if err != nil {
		return err
	}
	served := map[string]map[string][]string{} // group -> kind -> versions
	for _, c := range crds {
		if served[c.Spec.Group] == nil {
			served[c.Spec.Group] = map[string][]string{}
		}
		for _, v := range c.Spec.Versions {
			if v.Served {
				served[c.Spec.Group][c.Spec.Names.Kind] = append(served[c.Spec.Group][c.Spec.Names.Kind], v.Name)
			}
		}
	}
	for _, w := range append(append([]abi.Watch{m.For}, m.Owns...), m.Watches...) {
		gvk := schema.FromAPIVersionAndKind(w.APIVersion, w.Kind)
		group, ok := served[gvk.Group]
		if !ok || slices.Contains(group[gvk.Kind], gvk.Version) {
			continue
		}
		where := filepath.Join(dir, "crds", "*.yaml")
		if versions, ok := group[gvk.Kind]; ok {
			return fmt.Errorf("plugin %q watches %s, but %s serve %s at %s only", m.Name, kinds.GVK(gvk), where, gvk.Kind, strings.Join(versions, ", "))
		}
		if k := kinds.Closest(gvk.Kind, slices.Sorted(maps.Keys(group))); k != "" {
			return fmt.Errorf("plugin %q watches %s, which %s do not define: did you mean %s?", m.Name, kinds.GVK(gvk), where, k)
		}
		return fmt.Errorf("plugin %q watches %s, which %s do not define (they define %s of %s)", m.Name, kinds.GVK(gvk), where, strings.Join(slices.Sorted(maps.Keys(group)), ", "), gvk.Group)
	}
	return nil
}

// folderCRDs reads a plugin folder's crds/*.yaml, the CRDs wasmrec dev installs: none when it
// has none.
func folderCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if len(paths) == 0 {
		return nil, nil
	}
	return crd.Read(paths...)
}

// warnGrant says, without failing the build, when DIR/host.yaml grants the plugin less than its
// manifest asks for: wasmrec dev and wasmrec test would refuse it, and so would a host given
// that grant.
func warnGrant(w io.Writer, from string, grant []abi.Permission, m *abi.Manifest) {
	if grant == nil { // no host.yaml
		return
	}
	if _, err := abi.NewPolicy(m.Name, grant, m.Permissions, nil); err != nil {
		fmt.Fprintf(w, "warning: %s: %v (the grant: %s); wasmrec dev and wasmrec test refuse the plugin until they agree\n", m.Name, err, from)
	}
}
