package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/recordpage"
)

func newReplayCommand(stdout io.Writer) *cobra.Command {
	var (
		modulePath, cacheDir, from, page string
		list, show                       bool
		timeout                          time.Duration
	)
	kube := genericclioptions.NewConfigFlags(false)
	cmd := &cobra.Command{
		Use:   "replay DIR|PLUGIN [DIGEST...]",
		Short: "Run recorded reconciles again, offline, and check that the plugin does the same",
		Long: `replay reads a plugin's recordings (the host keeps them when the plugin's settings set record:
see docs/recordings.md) and runs each again with no cluster: the same module, started in the
same state (the steps its instance ran before the reconcile, from its initialisation), given
what the recording says it read (each host call's answer, the clocks, the random bytes). It
checks that the guest makes every host call with the same bytes in the same order, writes the
same output, and returns the same result, and stops each replay at the first difference,
which it prints. It exits 1 if any recording differs.

DIR is a plugin's recordings directory; a bare PLUGIN name is that plugin's directory in the
default recordings directory (the user cache directory's wasmrec/recordings). With no DIGEST
it replays them all, the oldest first; a DIGEST may be a prefix of one.

The module is the one kept beside the recordings, by digest. --module runs them on another build
instead, as far as the recordings can answer it: the steps before each reconcile, then the
reconcile, given the recorded clocks and random bytes in turn, the recorded answer to each read
it makes the same, and to each write of an object the recorded version wrote (a write of another
object is taken as done, a read of another as not found). For each recording it prints how what
the build did differs from what was recorded: each write field by field, the Events, the result.`,
		Example: `  wasmrec replay app --list
  wasmrec replay app
  wasmrec replay ~/.cache/wasmrec/recordings/app 3f9a2c
  wasmrec replay app 3f9a2c --show
  wasmrec replay app --module app-v2.wasm   # what v2 would have done, against each recording
  wasmrec replay app 3f9a2c --page 3f9a2c.html   # the same, as a page to open in a browser`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				targets []replayTarget
				err     error
			)
			if from != "" {
				targets, err = fetchRecordings(cmd.Context(), from, args[0], args[1:], kube, list, stdout)
			} else {
				targets, err = localRecordings(args[0], args[1:])
			}
			if err != nil || len(targets) == 0 {
				return err
			}
			if list {
				listRecordings(stdout, targets)
				return nil
			}
			var module []byte
			if modulePath != "" {
				if module, err = os.ReadFile(modulePath); err != nil {
					return fmt.Errorf("--module: %w", err)
				}
			}
			r := &replays{module: module, modulePath: modulePath, timeout: timeout, show: show, out: stdout, page: page != ""}
			if r.engine, err = wasm.NewEngine(wasm.EngineOptions{CacheDir: cacheDir}); err != nil {
				return err
			}
			defer r.close(cmd.Context())
			differ := 0
			for _, group := range byInstance(targets) {
				n, err := r.replayInstance(cmd.Context(), group)
				if err != nil {
					return err
				}
				differ += n
			}
			if page != "" {
				if err := writePage(page, args[0], r.sections, stdout); err != nil {
					return err
				}
			}
			if differ > 0 {
				return fmt.Errorf("%d of %s replayed differently", differ, count(len(targets), "recording"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "fetch the recordings from a host (https://HOST:PORT, its --metrics-bind-address) with the kubeconfig's token, and keep them in the user cache directory's wasmrec/fetched; the first argument is then the plugin's name")
	kube.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&modulePath, "module", "", "run the recordings on this build (a .wasm file) instead, and show how what it does differs: its writes field by field, its Events, its result")
	cmd.Flags().BoolVar(&list, "list", false, "list the recordings instead of replaying them")
	cmd.Flags().BoolVar(&show, "show", false, "print each recording's events, in order, before its replay")
	cmd.Flags().StringVar(&page, "page", "", "also write the recordings as one HTML page to this file: each request, its timeline of host calls with their answers, its writes as field diffs, and with --module both builds' writes side by side")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up a replay that runs this long")
	cmd.Flags().StringVar(&cacheDir, "compilation-cache", "", `directory for compiled modules ("-" for none)`)
	return cmd
}

// recordingsDirOf is arg as a directory, or a plugin's in the default recordings directory.
func recordingsDirOf(arg string) (string, error) {
	if info, err := os.Stat(arg); err == nil && info.IsDir() {
		return arg, nil
	}
	if !looksLikePath(arg) {
		dir := filepath.Join(defaultRecordingsDir(), arg)
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			return dir, nil
		}
		return "", fmt.Errorf("%s: no such directory, and no plugin %q has recordings in %s", arg, arg, defaultRecordingsDir())
	}
	return "", fmt.Errorf("%s: no such directory: give a plugin's recordings directory (run --recordings-dir's, a directory per plugin)", arg)
}

func listRecordings(w io.Writer, targets []replayTarget) {
	for _, t := range targets {
		outcome := t.Outcome
		if t.Failed && outcome == recording.Returned {
			outcome = "returned an error"
		}
		fmt.Fprintf(w, "%s  %s  %s  module %s  %s, after %s of instance %s\n", recording.ShortDigest(t.Digest), t.Time.Format(time.RFC3339),
			t.Request.String(), recording.ShortDigest(t.Module), outcome, count(t.Before, "step"), t.Instance)
	}
}

// requestOf is what a step was given: a reconcile's request, or a map's watch and object.
func requestOf(s *recording.Step) string {
	switch {
	case s.Request != nil:
		return s.Request.String()
	case s.Map != nil:
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(s.Map.Object, &o)
		return fmt.Sprintf("watches[%d] %s %s", s.Map.Watch, o.Kind, recording.Request{Namespace: o.Metadata.Namespace, Name: o.Metadata.Name})
	}
	return "-"
}

func countCalls(s *recording.Step) int {
	n := 0
	for _, e := range s.Events {
		if e.Type == recording.EventCall {
			n++
		}
	}
	return n
}

// replays replays recordings, compiling each module once.
type replays struct {
	module     []byte // --module's, if set
	modulePath string
	timeout    time.Duration
	show       bool
	out        io.Writer
	page       bool // keep sections for --page
	sections   []recordpage.Section
	engine     *wasm.Engine
	modules    map[string]*wasm.Module // by digest and settings
}

func (r *replays) close(ctx context.Context) {
	for _, m := range r.modules {
		_ = m.Close(ctx)
	}
}

// byInstance groups targets by the instance they were recorded on, each group by its steps'
// order, the groups in the order of their first recording.
func byInstance(targets []replayTarget) [][]replayTarget {
	var groups [][]replayTarget
	at := map[string]int{}
	for _, t := range targets {
		i, ok := at[t.InstanceDir()]
		if !ok {
			i = len(groups)
			at[t.InstanceDir()] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], t)
	}
	for _, g := range groups {
		slices.SortStableFunc(g, func(a, b replayTarget) int { return a.Before - b.Before })
	}
	return groups
}

// replayInstance replays the recordings of one instance, with one run of its steps up to the
// last of them: each recording is a step of that run, checked as it passes (a recording of
// the 1000th reconcile replays the 999 before it: replayed one by one, an instance's
// recordings would cost the square of its steps). It prints what it found of each, and
// returns how many differ.
func (r *replays) replayInstance(ctx context.Context, group []replayTarget) (int, error) {
	last := group[len(group)-1]
	rec, before, err := last.Load()
	if err != nil {
		return 0, err
	}
	steps := append(before[:len(before):len(before)], rec.Step)
	if r.show {
		for _, t := range group {
			printSteps(r.out, recording.ShortDigest(t.Digest), steps[:t.Before], steps[t.Before])
		}
	}
	m, err := r.moduleFor(ctx, last.dir, rec)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	differ := 0
	if r.module != nil { // another build: what it would have done, against what was done
		got, err := m.RerunSteps(rctx, steps)
		if err != nil {
			return 0, fmt.Errorf("recording %s: %w", recording.ShortDigest(last.Digest), err)
		}
		for _, t := range group {
			want := steps[t.Before]
			short := recording.ShortDigest(t.Digest)
			diffs := recording.Compare(want, got[t.Before])
			r.addSection(t, want, "", &recordpage.Other{Module: r.modulePath, Step: got[t.Before], Differences: diffs})
			if len(diffs) == 0 {
				fmt.Fprintf(r.out, "%s  %s  the same on %s: %s, %s\n", short, requestOf(want), r.modulePath, want.Describe(), count(len(want.Writes()), "write"))
				continue
			}
			differ++
			fmt.Fprintf(r.out, "%s  %s  DIFFERS on %s:\n", short, requestOf(want), r.modulePath)
			for _, d := range diffs {
				fmt.Fprintf(r.out, "    %s\n", d)
			}
		}
		return differ, nil
	}
	err = m.Replay(rctx, before, rec.Step)
	var d *wasm.Difference
	if err != nil && !errors.As(err, &d) {
		return 0, fmt.Errorf("recording %s: %w", recording.ShortDigest(last.Digest), err)
	}
	var first string
	for _, t := range group {
		want := steps[t.Before]
		short := recording.ShortDigest(t.Digest)
		switch {
		case d == nil || d.Step > t.Before:
			r.addSection(t, want, "the same, replayed offline", nil)
			fmt.Fprintf(r.out, "%s  %s  the same: %s, %s, after %s of its instance\n", short, requestOf(want), want.Describe(), count(countCalls(want), "call"), count(t.Before, "step"))
		case first == "":
			differ++
			first = short
			r.addSection(t, want, fmt.Sprintf("DIFFERS: %v", d), nil)
			fmt.Fprintf(r.out, "%s  %s  DIFFERS: %v\n", short, requestOf(want), d)
			if d.Want != nil && d.Got != nil && d.Want.Type == d.Got.Type {
				fmt.Fprint(r.out, describeBytesDiff(d.Want.In, d.Got.In))
			}
		default:
			differ++
			r.addSection(t, want, fmt.Sprintf("DIFFERS: its instance's step %d differs, as for %s", d.Step, first), nil)
			fmt.Fprintf(r.out, "%s  %s  DIFFERS: its instance's step %d differs, as for %s\n", short, requestOf(want), d.Step, first)
		}
	}
	return differ, nil
}

// addSection keeps recording t, whose reconcile is step, for the page.
func (r *replays) addSection(t replayTarget, step *recording.Step, replay string, other *recordpage.Other) {
	if !r.page {
		return
	}
	rec := *t.Recording
	rec.Step = step
	r.sections = append(r.sections, recordpage.Section{Digest: t.Digest, Recording: &rec, Replay: replay, Other: other})
}

// writePage writes the sections to path as a page.
func writePage(path, what string, sections []recordpage.Section, stdout io.Writer) error {
	title := fmt.Sprintf("%s: %s", what, count(len(sections), "recording"))
	var b bytes.Buffer
	if err := recordpage.Write(&b, recordpage.Page{Title: title, Sections: sections}); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil { // it holds what the plugin read
		return fmt.Errorf("--page: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s (%s): open it in a browser\n", relative(path), count(len(sections), "recording"))
	return nil
}

func (r *replays) moduleFor(ctx context.Context, dir string, rec *recording.Recording) (*wasm.Module, error) {
	b := r.module
	key := fmt.Sprintf("%s %+v", rec.Module, rec.Settings)
	if r.module != nil {
		key = "--module " + key
	}
	if m := r.modules[key]; m != nil {
		return m, nil
	}
	if b == nil {
		var err error
		if b, err = recording.LoadModule(dir, rec.Module); err != nil {
			return nil, fmt.Errorf("the module %s the recordings were made with is not in %s (%v): give it with --module", recording.ShortDigest(rec.Module), dir, err)
		}
	}
	m, err := r.engine.Compile(ctx, b, wasm.ReplayOptions(rec.Settings))
	if err != nil {
		return nil, err
	}
	if r.modules == nil {
		r.modules = map[string]*wasm.Module{}
	}
	r.modules[key] = m
	return m, nil
}

// describeBytesDiff shows where two byte strings first differ, with a little around it.
func describeBytesDiff(want, got []byte) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	if i == len(want) && i == len(got) {
		return ""
	}
	from := max(0, i-40)
	cut := func(b []byte) string { return fmt.Sprintf("%q", b[min(from, len(b)):min(i+60, len(b))]) }
	return fmt.Sprintf("    first differing byte %d:\n      recorded: ...%s\n      replayed: ...%s\n", i, cut(want), cut(got))
}

// printSteps prints a recording's steps: the earlier ones in a line each, the reconcile event by
// event.
func printSteps(w io.Writer, short string, before []*recording.Step, step *recording.Step) {
	fmt.Fprintf(w, "%s: %s before it on its instance\n", short, count(len(before), "step"))
	for i, s := range before {
		fmt.Fprintf(w, "  step %d  %s %s  %s  %s\n", i, s.Kind, requestOf(s), count(len(s.Events), "event"), s.Describe())
	}
	fmt.Fprintf(w, "  step %d  reconcile %s\n", len(before), requestOf(step))
	for i, e := range step.Events {
		line := wasm.DescribeEvent(&e)
		switch e.Type {
		case recording.EventCall:
			line += fmt.Sprintf(" -> %s %s", abi.Status(e.Status), clipBytes(e.Out))
		case recording.EventMonotime:
			line += fmt.Sprintf(": %s", time.Duration(e.N))
		case recording.EventWalltime:
			line += fmt.Sprintf(": %s", time.Unix(0, e.N).UTC().Format(time.RFC3339Nano))
		}
		fmt.Fprintf(w, "    %3d  %s\n", i, strings.ReplaceAll(line, "\n", " "))
	}
	fmt.Fprintf(w, "    end  %s\n", step.Describe())
}

func clipBytes(b []byte) string {
	if len(b) > 160 {
		return fmt.Sprintf("%q... (%d bytes)", b[:160], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// replayTarget is a recording to replay: its digest, in a plugin's recordings directory.
type replayTarget struct {
	dir string
	recording.Listed
}

// resolve picks the recordings of listed (dir's) that the digests name (prefixes of their
// digests), all of them for none.
func resolve(dir string, listed []recording.Listed, digests []string) ([]replayTarget, error) {
	var out []replayTarget
	if len(digests) == 0 {
		for _, l := range listed {
			out = append(out, replayTarget{dir, l})
		}
		return out, nil
	}
	for _, d := range digests {
		hex := strings.TrimPrefix(d, "sha256:")
		var match []recording.Listed
		for _, l := range listed {
			if strings.HasPrefix(strings.TrimPrefix(l.Digest, "sha256:"), hex) {
				match = append(match, l)
			}
		}
		switch len(match) {
		case 0:
			return nil, fmt.Errorf("no recording %s in %s: `wasmrec replay %s --list` lists them", d, dir, dir)
		case 1:
			out = append(out, replayTarget{dir, match[0]})
		default:
			return nil, fmt.Errorf("%d recordings in %s begin with %s: give more of the digest", len(match), dir, hex)
		}
	}
	return out, nil
}

// localRecordings are the recordings of arg (a directory, or a plugin's name) with these
// digests, or all of them.
func localRecordings(arg string, digests []string) ([]replayTarget, error) {
	dir, err := recordingsDirOf(arg)
	if err != nil {
		return nil, err
	}
	listed, err := recording.List(dir)
	if err != nil {
		return nil, err
	}
	if len(listed) == 0 {
		return nil, noRecordings(dir, arg)
	}
	return resolve(dir, listed, digests)
}

// noRecordings says that dir, given as arg, holds no recordings, and where they may be instead:
// in the directories of the plugins under it (dir is a host's --recordings-dir), or in the
// default directory's, if arg names a plugin there.
func noRecordings(dir, arg string) error {
	entries, _ := os.ReadDir(dir)
	var plugins []string
	for _, e := range entries {
		if l, err := recording.List(filepath.Join(dir, e.Name())); e.IsDir() && err == nil && len(l) > 0 {
			plugins = append(plugins, e.Name())
		}
	}
	if len(plugins) > 0 {
		return fmt.Errorf("%s holds the recordings of plugins, a directory each (%s): give one, as %s", dir, strings.Join(plugins, ", "), filepath.Join(dir, plugins[0]))
	}
	if other := filepath.Join(defaultRecordingsDir(), arg); !looksLikePath(arg) && other != dir {
		if l, err := recording.List(other); err == nil && len(l) > 0 {
			return fmt.Errorf("%s is a folder here with no recordings; plugin %s's are in %s: give that path", arg, arg, other)
		}
	}
	return fmt.Errorf("%s holds no recordings: is the plugin's record set (and not none), and has it reconciled since? A host keeps a plugin's in its --recordings-dir, in a directory of the plugin's name", dir)
}

// fetchRecordings fetches a plugin's recordings from a host, those with these digests or all,
// each into a directory of its own under the user cache directory's wasmrec/fetched.
func fetchRecordings(ctx context.Context, from, plugin string, digests []string, kube *genericclioptions.ConfigFlags, listOnly bool, stdout io.Writer) ([]replayTarget, error) {
	if u, err := url.Parse(from); err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("--from %q: give the host's metrics address, https://HOST:PORT (its --metrics-bind-address; it serves recordings over HTTPS, with --metrics-auth)", from)
	}
	cfg, err := kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("--from needs a token the API server accepts, from the kubeconfig: %w", err)
	}
	token := cfg.BearerToken
	if token == "" && cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, errors.New("--from: the kubeconfig's user has no bearer token; give one with --token (the host asks the API server who it is)")
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: cfg.Insecure} //nolint:gosec // the user's own choice, as for the API server
	if *kube.Insecure {
		tlsCfg.InsecureSkipVerify = true
	}
	if ca := *kube.CAFile; ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		tlsCfg.RootCAs = x509.NewCertPool()
		tlsCfg.RootCAs.AppendCertsFromPEM(pem)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 5 * time.Minute}
	get := func(path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(from, "/")+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		var unverified *tls.CertificateVerificationError
		switch {
		case errors.As(err, &unverified):
			return nil, fmt.Errorf("--from %s: %w: the host's certificate is its own unless it runs with --metrics-cert-dir: add --certificate-authority with its CA, or --insecure-skip-tls-verify", from, err)
		case err != nil:
			return nil, fmt.Errorf("--from %s: %w", from, err)
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return nil, fmt.Errorf("%s%s: %s: %s", from, path, resp.Status, strings.TrimSpace(string(body)))
		}
		return resp, nil
	}
	resp, err := get(plugin2path(plugin, ""))
	if err != nil {
		return nil, err
	}
	var items []struct {
		Digest  string            `json:"digest"`
		Time    time.Time         `json:"time"`
		Request recording.Request `json:"request"`
		Outcome string            `json:"outcome"`
	}
	err = json.NewDecoder(resp.Body).Decode(&items)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: the list of recordings: %w", from, err)
	}
	var want []string
	for _, it := range items {
		if len(digests) == 0 || slices.ContainsFunc(digests, func(d string) bool {
			return strings.HasPrefix(strings.TrimPrefix(it.Digest, "sha256:"), strings.TrimPrefix(d, "sha256:"))
		}) {
			want = append(want, it.Digest)
		}
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("%s has no recordings of plugin %q%s", from, plugin, map[bool]string{true: "", false: " with those digests"}[len(digests) == 0])
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "wasmrec", "fetched", plugin)
	have := map[string]bool{}
	if listed, err := recording.List(dir); err == nil {
		for _, l := range listed {
			have[l.Digest] = true
		}
	}
	fetched := 0
	for _, d := range want {
		if !have[d] {
			resp, err := get(plugin2path(plugin, d))
			if err != nil {
				return nil, err
			}
			err = recording.ReadBundle(resp.Body, dir, 1<<30)
			resp.Body.Close()
			if err != nil {
				return nil, fmt.Errorf("recording %s: %w", recording.ShortDigest(d), err)
			}
			fetched++
		}
	}
	listed, err := recording.List(dir)
	if err != nil {
		return nil, err
	}
	targets, err := resolve(dir, listed, want)
	if err != nil {
		return nil, err
	}
	if !listOnly {
		fmt.Fprintf(stdout, "%s of %s from %s in %s (%d fetched now): `wasmrec replay %s` replays them offline\n",
			count(len(targets), "recording"), plugin, from, dir, fetched, dir)
	}
	return targets, nil
}

// count is "1 recording", "2 recordings".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func plugin2path(plugin, digest string) string {
	return "/recordings/" + url.PathEscape(plugin) + "/" + digest
}
