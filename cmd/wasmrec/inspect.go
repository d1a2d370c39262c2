package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

func newInspectCommand(stdout io.Writer) *cobra.Command {
	var output, cacheDir string
	var grant bool
	o := &hostOptions{}
	cmd := &cobra.Command{
		Use:   "inspect FILE|REF",
		Short: "Show a plugin module's ABI version, exports, imports, manifest and permissions",
		Long: `inspect reads a .wasm file, or pulls a module by OCI reference when no such file exists, and
checks it as the host does at load. For a module the host would refuse it prints only the error.
--grant prints the host.yaml entry that grants the plugin what its manifest asks for.`,
		Example: `  wasmrec inspect hello.wasm
  wasmrec inspect hello.wasm -o json
  wasmrec inspect registry.example/plugins/app:v1
  wasmrec inspect oci://registry.example/plugins/app:v1

  # The grant to paste into host.yaml:
  wasmrec inspect hello.wasm --grant`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file, ref, err := moduleArg(args[0])
			if err != nil {
				return err
			}
			name := file // what the output calls the module: a host.yaml's module would say the same
			var b []byte
			if file != "" {
				if b, err = os.ReadFile(file); err != nil {
					return err
				}
			} else {
				c, cerr := o.ociClient(nil)
				if cerr != nil {
					return cerr
				}
				m, perr := c.Pull(cmd.Context(), ref, oci.PullOptions{})
				if perr != nil {
					return fmt.Errorf("%s is neither a file nor a module that could be pulled: %w", args[0], perr)
				}
				b, name = m.Wasm, "oci://"+ref
			}
			if grant {
				return printGrant(cmd.Context(), name, b, output, cacheDir, stdout)
			}
			return inspect(cmd.Context(), name, b, output, cacheDir, stdout)
		},
	}
	o.addOCIFlags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or yaml")
	cmd.Flags().StringVar(&cacheDir, "compilation-cache", "", `directory for compiled modules ("-" for none)`)
	cmd.Flags().BoolVar(&grant, "grant", false, "print the host.yaml entry granting what the manifest asks for (-o yaml or json)")
	return cmd
}

type inspection struct {
	File        string        `json:"file"`
	Size        int           `json:"size"`
	Digest      string        `json:"digest,omitempty"`
	ABIVersion  int           `json:"abiVersion"`
	Exports     []string      `json:"exports"`
	Imports     []string      `json:"imports"`
	Manifest    *abi.Manifest `json:"manifest,omitempty"`
	Permissions []string      `json:"permissions,omitempty"`
}

// checkModule reads a module as the host does at load: it must compile, speak the ABI and
// give a manifest.
// checkModule loads the module as the host does, its instances capped at memoryLimit bytes (0:
// the host's default), and reads what it asks for.
func checkModule(ctx context.Context, path string, b []byte, cacheDir string, memoryLimit uint64) (*inspection, error) {
	engine, err := wasm.NewEngine(wasm.EngineOptions{CacheDir: cacheDir})
	if err != nil {
		return nil, err
	}
	defer engine.Close(ctx)
	in := &inspection{File: path, Size: len(b)}
	d, err := engine.Inspect(ctx, b)
	if err != nil {
		return nil, err
	}
	in.ABIVersion, in.Exports, in.Imports = d.ABIVersion, d.Exports, d.Imports
	m, err := engine.Compile(ctx, b, wasm.Options{Name: strings.TrimSuffix(filepath.Base(path), ".wasm"), MemoryLimit: memoryLimit})
	if err != nil {
		return nil, err
	}
	defer m.Close(ctx)
	in.Digest, in.Manifest = m.Digest(), m.Manifest()
	for _, w := range append(append([]abi.Watch{in.Manifest.For}, in.Manifest.Owns...), in.Manifest.Watches...) {
		gvk := schema.FromAPIVersionAndKind(w.APIVersion, w.Kind)
		if kinds.BuiltInGroup(gvk.Group) && !kinds.Lookup(gvk).BuiltIn {
			return nil, fmt.Errorf("plugin %q watches %s, which no API server serves: %s", in.Manifest.Name, kinds.GVK(gvk), kinds.NotBuiltIn(gvk))
		}
		// The host refuses it at load, as the fake cluster does: the manifest alone decides. A
		// custom kind's resource is the API server's to say (its CRD's plural), so only a
		// built-in kind's is checked here.
		if k := kinds.Lookup(gvk); k.BuiltIn {
			asked := abi.Policy{Plugin: in.Manifest.Name, Asked: in.Manifest.Permissions, Granted: in.Manifest.Permissions}
			if err := asked.Require("watching "+kinds.GVK(gvk), abi.WatchRules(gvk.Group, k.Resource)); err != nil {
				return nil, fmt.Errorf("plugin %q: %w", in.Manifest.Name, err)
			}
		}
	}
	for _, r := range abi.Rules(in.Manifest.Permissions) {
		in.Permissions = append(in.Permissions, r.String())
	}
	return in, nil
}

// inspect prints what checkModule found, or, for a module the host would refuse, nothing but
// the error.
func inspect(ctx context.Context, path string, b []byte, output, cacheDir string, stdout io.Writer) error {
	if output != "text" && output != "json" && output != "yaml" {
		return fmt.Errorf("--output %q: use text, json or yaml", output)
	}
	in, err := checkModule(ctx, path, b, cacheDir, 0)
	if err != nil {
		return fmt.Errorf("%s is not a usable plugin: %w", path, err)
	}
	return printAs(stdout, output, in, func(w io.Writer) { printInspection(w, in) })
}

func printInspection(w io.Writer, in *inspection) {
	label := "file:        "
	if strings.HasPrefix(in.File, "oci://") {
		label = "module:      "
	}
	fmt.Fprintf(w, "%s %s (%d bytes)\n", label, in.File, in.Size)
	if in.Digest != "" {
		fmt.Fprintf(w, "digest:       %s\n", in.Digest)
	}
	fmt.Fprintf(w, "ABI version:  %d (host speaks %d)\n", in.ABIVersion, abi.Version)
	fmt.Fprintf(w, "exports:\n  %s\n", strings.Join(in.Exports, "\n  "))
	fmt.Fprintf(w, "imports:\n  %s\n", strings.Join(once(in.Imports), "\n  "))
	if m := in.Manifest; m != nil {
		fmt.Fprintf(w, "manifest:\n  name: %s\n  for: %s\n", m.Name, watchString(m.For))
		for _, o := range m.Owns {
			fmt.Fprintf(w, "  owns: %s\n", watchString(o))
		}
		for _, x := range m.Watches {
			fmt.Fprintf(w, "  watches: %s\n", watchString(x))
		}
		fmt.Fprintf(w, "permissions requested:\n  %s\n", cmp.Or(strings.Join(in.Permissions, "\n  "), "(none)"))
	}
}

// once lists each of ss once, in order, saying how many times it came (Go's runtime and its
// syscall package each import fd_write).
func once(ss []string) []string {
	count := map[string]int{}
	var out []string
	for _, s := range ss {
		if count[s]++; count[s] == 1 {
			out = append(out, s)
		}
	}
	for i, s := range out {
		if n := count[s]; n > 1 {
			out[i] = fmt.Sprintf("%s (imported %d times)", s, n)
		}
	}
	return out
}

func watchString(x abi.Watch) string {
	s := kinds.String(x.APIVersion, x.Kind)
	if x.Map != "" {
		s += " (map: " + x.Map + ")"
	}
	for _, p := range x.Predicates {
		b, _ := json.Marshal(p)
		s += " " + string(b)
	}
	return s
}

// printGrant prints the host config entry that grants the module's plugin what its manifest
// asks for: what an operator pastes into host.yaml's plugins.
func printGrant(ctx context.Context, path string, b []byte, output, cacheDir string, stdout io.Writer) error {
	in, err := checkModule(ctx, path, b, cacheDir, 0)
	if err != nil {
		return fmt.Errorf("%s is not a usable plugin: %w", path, err)
	}
	type entry struct { // plugin.Config's fields that a grant sets
		Name        string           `json:"name"`
		Module      string           `json:"module"`
		Permissions []abi.Permission `json:"permissions"`
	}
	if output == "text" {
		output = "yaml"
	}
	if err := printAs(stdout, output, map[string][]entry{"plugins": {{in.Manifest.Name, path, in.Manifest.Permissions}}}, nil); err != nil {
		return err
	}
	if output == "yaml" { // what the module cannot say: where its plugin may act
		_, err = fmt.Fprint(stdout, "  # namespaces: [team-a]   # the namespaces it acts in; without them, every namespace\n")
	}
	return err
}

// looksLikePath tells a file name from an OCI reference: a .wasm name, or a path that starts at
// the working directory or the root, is a file.
func looksLikePath(s string) bool {
	return strings.HasSuffix(s, ".wasm") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || filepath.IsAbs(s)
}
