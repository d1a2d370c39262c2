package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/internal/build"
	"github.com/wasmrec/wasmrec/internal/explore"
	"github.com/wasmrec/wasmrec/internal/plugintest"
)

type testOptions struct {
	module, hostConfig, run, cacheDir string
	fromRecording, digest             string
	verbose                           int
	optimize                          bool
}

func newTestCommand(stdout, stderr io.Writer) *cobra.Command {
	var o testOptions
	cmd := &cobra.Command{
		Use:   "test [DIR | FILE.yaml...]",
		Short: "Run a plugin's YAML test cases without a cluster, whatever its language",
		Long: `test builds the plugin in DIR (default the working directory) as 'wasmrec build' does, or takes
the module --module names, and runs the cases of DIR/tests/*.yaml (or of the files given) on the
host's own WebAssembly engine. The plugin's host calls are answered by a cluster in memory (the
Go SDK's fake cluster) with the statuses the host gives, and checked against its manifest and
the grant of DIR/host.yaml (or --host-config; without one, the manifest's own permissions), as
the host checks them. DIR/crds/*.yaml tell it the custom resources' plurals and scopes.

Each case starts from its own cluster holding the objects under before:, reconciles the
request, and compares what happened with what it expects: the Result, objects after (only the
fields given are compared), objects gone, the Events and log lines. A case that differs prints
each difference by its field; test then exits with an error. The case format is in
docs/plugin-authors.md, "Testing without a cluster".

--from-recording first writes a case of a recorded reconcile (docs/recordings.md) to
tests/recorded-<digest>.yaml: the objects it read as before, and what the recorded version did
(its writes, deletes, Events and result) as what is expected. It says what the case cannot hold:
state the plugin kept from earlier reconciles, a JSON patch.`,
		Example: `  # In a plugin's folder (Go or C): build it and run tests/*.yaml
  wasmrec test

  # One file, the cases whose name matches, with the plugin's log lines:
  wasmrec test tests/marks.yaml --run 'marks' -v 1

  # A module built elsewhere (any language), against the cases in ./tests:
  wasmrec test --module build/plugin.wasm

  # The plugin's newest failed reconcile the host recorded, as a case in tests/, then all:
  wasmrec test --from-recording ~/.cache/wasmrec/recordings/app
  wasmrec test --from-recording app --digest 3f9a2c`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTests(cmd.Context(), args, o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.module, "module", "", "the module to test, instead of building DIR")
	f.BoolVar(&o.optimize, "optimize", false, "run wasm-opt -Oz -g on a Go module, as wasmrec build --optimize does (the two then share a build)")
	f.StringVar(&o.hostConfig, "host-config", "", "the host config whose grant the plugin gets (default DIR/host.yaml, if there)")
	f.StringVar(&o.run, "run", "", "run only the cases whose name matches this regular expression")
	f.IntVarP(&o.verbose, "verbose", "v", 0, "1 prints the plugin's log lines of every case, not only of those that fail")
	f.StringVar(&o.cacheDir, "compilation-cache", "", `directory for compiled modules ("-" for none)`)
	f.StringVar(&o.fromRecording, "from-recording", "", "make a case of a recorded reconcile first: a plugin's recordings directory, or its name in the default one")
	f.StringVar(&o.digest, "digest", "", "with --from-recording, the recording (a prefix of its digest; default the newest that failed)")
	return cmd
}

func runTests(ctx context.Context, args []string, o testOptions, stdout, stderr io.Writer) error {
	dir, files, err := testArgs(args)
	if err != nil {
		return err
	}
	filter, err := caseFilter(o.run)
	if err != nil {
		return err
	}
	if o.digest != "" && o.fromRecording == "" {
		return fmt.Errorf("--digest names a recording of --from-recording: give both")
	}
	if o.fromRecording != "" {
		path, err := writeRecordedCase(dir, o.fromRecording, o.digest, stdout)
		if err != nil {
			return err
		}
		if files != nil {
			files = append(files, path)
		}
	}
	s, suites, grantFrom, err := loadCases(ctx, dir, files, filter, o, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.Close(context.WithoutCancel(ctx))

	var ran, failed int
	for _, tf := range suites {
		fmt.Fprintln(stdout, tf.Path)
		for _, c := range tf.Cases {
			ran++
			var out plugintest.Outcome
			if c.Explore != nil {
				out, err = explore.RunCase(ctx, s, c)
			} else {
				out, err = s.Run(ctx, c)
			}
			switch {
			case errors.Is(err, plugintest.ErrRefused): // every case would say it
				return fmt.Errorf("%w (the grant: %s)", err, grantFrom)
			case err != nil:
				failed++
				fmt.Fprintf(stdout, "  FAIL  %s: the case cannot run: %v\n", c.Name, err)
			case !out.Passed():
				failed++
				fmt.Fprintf(stdout, "  FAIL  %s (%s)\n", c.Name, roundDuration(out.Duration))
				for _, f := range out.Failures {
					fmt.Fprintln(stdout, indentBy(f, "        "))
				}
				if c.Explore == nil { // an exploration's runs log too much to show
					printLogs(stdout, out.Logs)
				}
			default:
				fmt.Fprintf(stdout, "  ok    %s (%s)\n", c.Name, roundDuration(out.Duration))
				for _, n := range out.Notes {
					fmt.Fprintln(stdout, indentBy("note: "+n, "        "))
				}
				if o.verbose > 0 && c.Explore == nil {
					printLogs(stdout, out.Logs)
				}
			}
		}
	}
	if ran == 0 {
		return fmt.Errorf("no case's name matches --run %q", o.run)
	}
	if failed > 0 { // said once, as the command's error
		return fmt.Errorf("%d of %s failed", failed, cases(ran))
	}
	fmt.Fprintf(stdout, "%s passed\n", cases(ran))
	return nil
}

// testArgs reads test's and explore's arguments: one plugin folder, or test files (.yaml) to run
// in the working directory's.
func testArgs(args []string) (dir string, files []string, err error) {
	dir = "."
	for _, a := range args {
		if strings.HasSuffix(a, ".yaml") || strings.HasSuffix(a, ".yml") {
			files = append(files, a)
		} else if len(args) == 1 {
			dir = a
		} else {
			return "", nil, fmt.Errorf("%s: give one plugin folder, or test files (.yaml), which run against the plugin in the working directory; to run a folder's files, cd into it first", a)
		}
	}
	return dir, files, nil
}

// loadCases reads the case files (files, or DIR/tests/*.yaml), then builds the plugin in dir
// (or takes o.module) and loads it with the grant of its host config and the kinds of its CRDs.
// It returns where the grant comes from.
// caseFilter is --run's regular expression, nil for every case.
func caseFilter(run string) (*regexp.Regexp, error) {
	if run == "" {
		return nil, nil
	}
	filter, err := regexp.Compile(run)
	if err != nil {
		return nil, fmt.Errorf("--run: %w", err)
	}
	return filter, nil
}

// loadCases reads the case files (those of DIR/tests for nil files), keeping the cases filter
// matches, builds the plugin unless o names its module, and loads it.
func loadCases(ctx context.Context, dir string, files []string, filter *regexp.Regexp, o testOptions, stdout, stderr io.Writer) (*plugintest.Suite, []*plugintest.File, string, error) {
	if files == nil {
		files, _ = filepath.Glob(filepath.Join(dir, "tests", "*.yaml"))
		if len(files) == 0 {
			return nil, nil, "", fmt.Errorf("no test cases: %s holds no tests/*.yaml (write one as docs/plugin-authors.md, \"Testing without a cluster\", shows)", filepath.Join(dir, "tests"))
		}
	}
	// Every file is read before anything is built: a mistake in one is said at once.
	var suites []*plugintest.File
	for _, f := range files {
		tf, err := plugintest.ReadFile(f)
		if err != nil {
			return nil, nil, "", err
		}
		if filter != nil {
			tf.Cases = slices.DeleteFunc(tf.Cases, func(c plugintest.Case) bool { return !filter.MatchString(c.Name) })
		}
		suites = append(suites, tf)
	}

	opts := plugintest.Options{CacheDir: o.cacheDir}
	grantFrom, err := readGrant(dir, o.hostConfig, &opts)
	if err != nil {
		return nil, nil, "", err
	}
	if err := readKinds(dir, &opts); err != nil {
		return nil, nil, "", err
	}
	path := o.module
	if path == "" {
		start := time.Now()
		var upToDate bool
		if path, err = folderModule(dir); err != nil {
			return nil, nil, "", err
		}
		if path, err = build.Build(dir, build.Options{Out: path, Warnings: stderr, UpToDate: &upToDate, Optimize: o.optimize}); err != nil {
			return nil, nil, "", err
		}
		if upToDate {
			fmt.Fprintf(stdout, "%s is up to date\n", relative(path))
		} else {
			fmt.Fprintf(stdout, "built %s in %s\n", relative(path), time.Since(start).Round(10*time.Millisecond))
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, "", err
	}
	s, err := plugintest.Load(ctx, b, opts)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s is not a usable plugin: %w", relative(path), err)
	}
	if err := checkFolderKinds(dir, s.Manifest()); err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, nil, "", fmt.Errorf("%s is not a usable plugin: %w", relative(path), err)
	}
	return s, suites, grantFrom, nil
}

func cases(n int) string {
	if n == 1 {
		return "1 case"
	}
	return fmt.Sprintf("%d cases", n)
}

func printLogs(w io.Writer, logs []string) {
	if len(logs) == 0 {
		fmt.Fprintln(w, "        (the plugin logged nothing)")
		return
	}
	fmt.Fprintln(w, "        the plugin logged:")
	for _, l := range logs {
		fmt.Fprintln(w, indentBy(l, "          "))
	}
}

func indentBy(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// relative is path from the working directory, when it is below it.
func relative(path string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return path
}

// readGrant sets the plugin's name, grant and namespaces from the host config: the one given,
// or DIR/host.yaml if there is one (the grant as it will be in production). It must hold
// exactly one plugin, as for wasmrec dev. It returns where the grant comes from.
func readGrant(dir, path string, opts *plugintest.Options) (string, error) {
	if path == "" {
		path = filepath.Join(dir, "host.yaml")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return "the manifest's own permissions, as there is no " + path, nil
		}
	}
	hc, err := plugin.LoadHostConfig(path)
	if err != nil {
		return "", err
	}
	if len(hc.Plugins) != 1 {
		return "", fmt.Errorf("%s holds %d plugins: test takes the grant of exactly one (give another file with --host-config)", path, len(hc.Plugins))
	}
	p := hc.Plugins[0]
	opts.Name, opts.Grant, opts.Namespaces = p.Name, p.Permissions, p.Namespaces
	if p.MemoryLimit != nil {
		opts.MemoryLimit = uint64(p.MemoryLimit.Value())
	}
	if opts.Grant == nil { // nothing granted, not the manifest's own
		opts.Grant = []abi.Permission{}
	}
	return "the permissions of " + relative(path), nil
}

// readKinds tells the cluster the custom resources of DIR/crds/*.yaml.
func readKinds(dir string, opts *plugintest.Options) error {
	crds, err := folderCRDs(dir)
	if err != nil {
		return err
	}
	for _, c := range crds {
		opts.Kinds = append(opts.Kinds, plugintest.Kind{Group: c.Spec.Group, Kind: c.Spec.Names.Kind, Resource: c.Spec.Names.Plural,
			Namespaced: c.Spec.Scope == apiextensionsv1.NamespaceScoped})
	}
	slices.SortFunc(opts.Kinds, func(a, b plugintest.Kind) int { return strings.Compare(a.Group+a.Kind, b.Group+b.Kind) })
	return nil
}

// roundDuration keeps two or three digits of a case's time: 412µs, 3.1ms, 1.25s.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(10 * time.Millisecond)
}
