package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wasmrec/wasmrec/internal/build"
	"github.com/wasmrec/wasmrec/internal/scaffold"
)

func newNewCommand(stdout io.Writer) *cobra.Command {
	o := scaffold.Options{}
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Make a plugin's folder: source, a test, a host.yaml and a sample object",
		Long: `new makes the folder NAME with a plugin that builds and tests as it is: for Go, main.go,
main_test.go (a test against the SDK's fake cluster) and go.mod; for C, NAME.c. Both get
tests/NAME.yaml (cases 'wasmrec test' runs without a cluster, whatever the language), a
host.yaml whose grant matches the plugin's manifest and samples/NAME.yaml, an object of the kind
the plugin reconciles. The plugin marks each object it reconciles with an annotation and
records an Event: replace that with your logic. For Go, new runs 'go mod tidy' when Go is
installed, with the Go SDK this wasmrec carries (no published copy is needed).`,
		Example: `  # A Go plugin for ConfigMaps, then its test, its build and a local run:
  wasmrec new hello --for v1/ConfigMap
  cd hello && go test ./...
  wasmrec build
  wasmrec dev --plugin .

  # A Go plugin for a custom resource whose CRD you have, typed from its schema:
  kubectl get crd cronjobs.batch.tutorial.kubebuilder.io -o yaml > cronjob-crd.yaml
  wasmrec new cronjob --crd cronjob-crd.yaml

  # A C plugin for Deployments, then its test cases (tests/rollout.yaml):
  wasmrec new rollout --lang c --for apps/v1/Deployment
  cd rollout && wasmrec test`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("name the plugin, once: wasmrec new NAME (lowercase letters, digits and dashes), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.Lang = args[0], strings.ToLower(o.Lang)
			if o.CRD != "" && !cmd.Flags().Changed("for") {
				o.For = "" // the file's CRD says the kind
			}
			files, err := scaffold.Write(o)
			if err != nil {
				return err
			}
			dir := o.Dir
			if dir == "" {
				dir = o.Name
			}
			for _, f := range files {
				fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(dir, f))
			}
			if o.Lang == "go" {
				if _, err := exec.LookPath("go"); err != nil {
					fmt.Fprintf(stdout, "go is not on PATH: once it is, wasmrec build in %s tidies the module first\n", dir)
				} else {
					fmt.Fprintln(stdout, "running go mod tidy (the Go SDK comes with wasmrec)")
					if err := build.Tidy(dir, build.Options{Warnings: stdout}); err != nil {
						return fmt.Errorf("%w\nthe files are written: once the cause is fixed, run wasmrec build in %s (it tidies a module that has no go.sum yet)", err, dir)
					}
					if _, err := build.Generate(dir, build.Options{Log: stdout}); err != nil {
						return fmt.Errorf("%w\nthe files are written: once the cause is fixed, run wasmrec build in %s", err, dir)
					}
				}
			}
			var crdFile, typesFile string
			for _, f := range files {
				switch {
				case strings.HasPrefix(f, "crds/"):
					crdFile = filepath.Join(dir, f)
				case strings.HasPrefix(f, "api/") && strings.HasSuffix(f, "_types.go"):
					typesFile = filepath.Join(dir, f)
				}
			}
			switch {
			case crdFile != "" && o.CRD != "":
				fmt.Fprintf(stdout, "\n%s is the CRD, from %s", crdFile, o.CRD)
				if typesFile != "" {
					fmt.Fprintf(stdout, "; %s holds Go types written from its schema (wasmrec build writes their codec and deep copies): they are yours to change, in step with the CRD", typesFile)
				}
				fmt.Fprintln(stdout)
			case crdFile != "":
				fmt.Fprintf(stdout, "\n%s is not a built-in kind: %s is a CRD to start from (wasmrec dev --plugin installs it); describe its fields in its schema", o.For, crdFile)
				if typesFile != "" {
					fmt.Fprintf(stdout, " and in its Go types, %s (wasmrec build writes their codec and deep copies); or start again with --crd FILE to begin from a CRD you have", typesFile)
				}
				fmt.Fprintln(stdout)
			}
			fmt.Fprintln(stdout, "\nnext:")
			if filepath.Clean(dir) != "." {
				fmt.Fprintf(stdout, "  cd %s\n", dir)
			}
			if o.Lang == "go" {
				fmt.Fprintln(stdout, "  go test ./...")
			} else {
				fmt.Fprintln(stdout, "  wasmrec test")
			}
			fmt.Fprintln(stdout, "  wasmrec build\n  wasmrec dev --plugin .")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Lang, "lang", "go", "the plugin's language: go or c")
	f.StringVar(&o.For, "for", "v1/ConfigMap", "the kind the plugin reconciles, as APIVERSION/KIND (apps/v1/Deployment, example.com/v1/Widget); with --crd, the kind of the file's CRD at its storage version")
	f.StringVar(&o.Module, "module", "", "the Go module path (default NAME)")
	f.StringVar(&o.Dir, "dir", "", "the folder to make (default NAME)")
	f.StringVar(&o.CRD, "crd", "", "for a custom resource: a YAML file holding its CustomResourceDefinition (kubectl get crd NAME -o yaml), copied to crds/; a Go plugin gets Go types written from its schema")
	return cmd
}
