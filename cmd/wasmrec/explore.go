package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/internal/explore"
	"github.com/wasmrec/wasmrec/internal/plugintest"
)

type exploreOptions struct {
	testOptions
	maxSchedules int
	save         bool
}

func newExploreCommand(stdout, stderr io.Writer) *cobra.Command {
	var o exploreOptions
	cmd := &cobra.Command{
		Use:   "explore [DIR | FILE.yaml...]",
		Short: "Run a plugin's cases to convergence under crashes, stale reads, conflicts and missed states",
		Long: `explore builds the plugin in DIR and reads its cases as 'wasmrec test' does. For each case it
drives the plugin, without a cluster, from the case's before: objects to convergence: every
object of the plugin's kind is reconciled, each write's watch event enqueues what the manifest's
watches say, results requeue and errors retry, as on the host. Then it makes the case's
explore.changes one at a time, each once the plugin has settled.

That run, without faults, is then made again under each single fault it allows, injected where
the plugin meets the host:
  crash      the host stops before each write of each reconcile, and after each reconcile; it
             starts again with new instances and lists every object
  stale      a read answers an object's version before its latest write, as a lagging cache
  conflict   an update or patch is answered with a conflict, as if another writer came first
  coalesce   two changes are made at once: the plugin never sees the state between them
Each run must settle in the same states as the run without faults (compared field by field,
times and generated names aside), within 20 reconciles of an object, and a reconcile once
settled must write nothing. A run that fails is printed with its fault and what differed, and
saved as a case, tests/explored-<case>-<n>.yaml, that 'wasmrec test' runs: it fails while the
plugin has the bug. explore exits with an error if any run failed.`,
		Example: `  # In a plugin's folder: explore every case of tests/*.yaml
  wasmrec explore

  # One case, a module built elsewhere, nothing saved:
  wasmrec explore --module plugin.wasm tests/widgets.yaml --run resized --save=false`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplore(cmd.Context(), args, o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.module, "module", "", "the module to explore, instead of building DIR")
	f.StringVar(&o.hostConfig, "host-config", "", "the host config whose grant the plugin gets (default DIR/host.yaml, if there)")
	f.StringVar(&o.run, "run", "", "explore only the cases whose name matches this regular expression")
	f.StringVar(&o.cacheDir, "compilation-cache", "", `directory for compiled modules ("-" for none)`)
	f.IntVar(&o.maxSchedules, "max-schedules", 2000, "run at most this many faults per case, spread evenly over them")
	f.BoolVar(&o.save, "save", true, "save each distinct failure as a case in DIR/tests")
	return cmd
}

func runExplore(ctx context.Context, args []string, o exploreOptions, stdout, stderr io.Writer) error {
	dir, files, err := testArgs(args)
	if err != nil {
		return err
	}
	if o.maxSchedules < 1 {
		return fmt.Errorf("--max-schedules %d: give how many faults to try at most, 1 or more", o.maxSchedules)
	}
	filter, err := caseFilter(o.run)
	if err != nil {
		return err
	}
	s, suites, grantFrom, err := loadCases(ctx, dir, files, filter, o.testOptions, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.Close(context.WithoutCancel(ctx))

	var ran, failed int
	for _, tf := range suites {
		fmt.Fprintln(stdout, tf.Path)
		for _, c := range tf.Cases {
			if c.Explore != nil && len(c.Explore.Faults) > 0 {
				fmt.Fprintf(stdout, "  skipped %s: it holds faults (one explore saved): wasmrec test runs it\n", c.Name)
				continue
			}
			ran++
			started := func(b explore.Run, n int) {
				fmt.Fprintf(stdout, "  %s: %s and %s without faults; trying %s\n", c.Name, count(b.Reconciles, "reconcile"), count(b.Writes, "write"), count(n, "fault"))
			}
			rep, err := explore.Explore(ctx, s, c, explore.Options{MaxSchedules: o.maxSchedules, Started: started})
			switch {
			case errors.Is(err, plugintest.ErrRefused):
				return fmt.Errorf("%w (the grant: %s)", err, grantFrom)
			case err != nil:
				failed++
				fmt.Fprintf(stdout, "  FAIL  %s: the case cannot run: %v\n", c.Name, err)
				continue
			}
			b := rep.Baseline
			if len(b.Problems) > 0 {
				fmt.Fprintf(stdout, "  %s: %s and %s without faults\n", c.Name, count(b.Reconciles, "reconcile"), count(b.Writes, "write"))
				failed++
				fmt.Fprintf(stdout, "    FAIL  without faults (%s)\n", roundDuration(b.Duration))
				for _, p := range b.Problems {
					fmt.Fprintln(stdout, indentBy(p, "          "))
				}
				if o.save {
					if err := saveExplored(dir, tf, c, plugintest.Fault{}, b.Problems, stdout); err != nil {
						return err
					}
				}
				continue
			}
			tried := count(rep.Schedules, "fault")
			if rep.Schedules < rep.Possible {
				tried = fmt.Sprintf("%s (of %d: --max-schedules)", tried, rep.Possible)
			}
			if len(rep.Failed) == 0 {
				if rep.Schedules == 0 {
					fmt.Fprintf(stdout, "    ok    without faults; its run allows none (it writes nothing, and reads no object a cache could lag on), in %s\n", roundDuration(rep.Duration))
				} else {
					fmt.Fprintf(stdout, "    ok    under all %s, in %s\n", tried, roundDuration(rep.Duration))
				}
				continue
			}
			failed++
			fmt.Fprintf(stdout, "    FAIL  under %d of %s, in %s\n", len(rep.Failed), tried, roundDuration(rep.Duration))
			// One of each kind of fault and first problem is shown and saved; the rest named.
			shown := map[string][]string{}
			var order []string
			for _, r := range rep.Failed {
				k := r.Faults[0].Type + "\x00" + sameWay(r.Problems[0])
				if shown[k] == nil {
					order = append(order, k)
					fmt.Fprintf(stdout, "      %s\n", r.Faults[0])
					for _, p := range r.Problems {
						fmt.Fprintln(stdout, indentBy(p, "          "))
					}
					if o.save {
						if err := saveExplored(dir, tf, c, r.Faults[0], r.Problems, stdout); err != nil {
							return err
						}
					}
					shown[k] = []string{}
					continue
				}
				shown[k] = append(shown[k], r.Faults[0].String())
			}
			for _, k := range order {
				if n := len(shown[k]); n > 0 {
					fmt.Fprintf(stdout, "      and %s failed the same way, the first: %s\n", count(n, "more "+strings.Split(k, "\x00")[0]+" fault"), shown[k][0])
				}
			}
		}
	}
	if ran == 0 {
		if o.run != "" {
			return fmt.Errorf("no case's name matches --run %q", o.run)
		}
		return fmt.Errorf("no case to explore: every case holds faults (explore saved them; wasmrec test runs them)")
	}
	if failed > 0 {
		return fmt.Errorf("%d of %s failed", failed, cases(ran))
	}
	fmt.Fprintf(stdout, "%s explored\n", cases(ran))
	return nil
}

var numbers = regexp.MustCompile(`[0-9]+`)

// sameWay is a problem without its numbers: two runs that fail "the same way".
func sameWay(problem string) string { return numbers.ReplaceAllString(problem, "#") }

// saveExplored writes the case under fault (none: the run without faults) to a new file in
// dir/tests, saying what it reproduces.
func saveExplored(dir string, tf *plugintest.File, c plugintest.Case, fault plugintest.Fault, problems []string, stdout io.Writer) error {
	saved := c
	e := plugintest.Exploration{}
	if c.Explore != nil {
		e.Changes = c.Explore.Changes
	}
	what := "without faults"
	if fault.Type != "" {
		e.Faults = []plugintest.Fault{fault}
		what = fault.String()
	}
	saved.Explore = &e
	saved.Name = c.Name + ", " + what
	b, err := yaml.Marshal(plugintest.File{Cases: []plugintest.Case{saved}})
	if err != nil {
		return err
	}
	var head strings.Builder
	fmt.Fprintf(&head, "# Found by wasmrec explore in %q of %s: %s.\n", c.Name, relative(tf.Path), what)
	head.WriteString("# wasmrec test runs it; it fails while the plugin does this:\n")
	for _, p := range problems {
		head.WriteString("#   " + strings.ReplaceAll(p, "\n", "\n#   ") + "\n")
	}
	slug := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(c.Name), "-"), "-")
	if len(slug) > 40 {
		slug = strings.TrimRight(slug[:40], "-")
	}
	tests := filepath.Join(dir, "tests")
	if err := os.MkdirAll(tests, 0o755); err != nil {
		return err
	}
	for n := 1; ; n++ {
		path := filepath.Join(tests, fmt.Sprintf("explored-%s-%d.yaml", slug, n))
		if existing, err := os.ReadFile(path); err == nil {
			if strings.Contains(string(existing), string(b)) {
				fmt.Fprintf(stdout, "          already saved in %s\n", relative(path))
				return nil
			}
			continue
		}
		if err := os.WriteFile(path, append([]byte(head.String()), b...), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "          saved %s\n", relative(path))
		return nil
	}
}
