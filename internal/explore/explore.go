package explore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/internal/plugintest"
)

// Options bound an exploration.
type Options struct {
	// MaxSchedules bounds the schedules run; past it, every n-th is run so that each fault type
	// and reconcile keeps its share. Defaults to 2000.
	MaxSchedules int
	// Started, if set, is told of the run without faults and how many faults will be tried,
	// before they are.
	Started func(baseline Run, schedules int)
}

// Report is what an exploration of one case found.
type Report struct {
	Case string
	// Baseline is the run without faults.
	Baseline Run
	// Schedules is how many fault schedules were run, of Possible.
	Schedules, Possible int
	// Failed are the schedules whose runs failed a check, in the order run.
	Failed   []Run
	Duration time.Duration
}

// Run is one run of a case: its faults and what it did.
type Run struct {
	Faults []plugintest.Fault
	// Reconciles and Writes (write calls) the run made.
	Reconciles, Writes int
	// Problems are the checks it failed, a line each; none if it passed.
	Problems []string
	Duration time.Duration
}

// Explore runs the case without faults, then under every single fault its run allows: a crash
// before each write of each reconcile and after each reconcile, a stale read of each object a
// reconcile read that had an earlier version, a conflict on each update and patch, each change
// made at once with the next. Each run must end as the run without faults did.
func Explore(ctx context.Context, s *plugintest.Suite, c plugintest.Case, opts Options) (*Report, error) {
	if opts.MaxSchedules <= 0 {
		opts.MaxSchedules = 2000
	}
	start := time.Now()
	changes := changesOf(c)
	rep := &Report{Case: c.Name}
	base, err := run(ctx, s, c.Before, changes, nil)
	if err != nil {
		return nil, err
	}
	rep.Baseline = base.summary(nil)
	rep.Baseline.Problems = append(rep.Baseline.Problems, checkEnd(c, base)...)
	if len(rep.Baseline.Problems) > 0 {
		rep.Duration = time.Since(start)
		return rep, nil // nothing to compare the faults with
	}
	schedules := schedulesOf(base, len(changes))
	rep.Possible = len(schedules)
	schedules = thin(schedules, opts.MaxSchedules)
	if opts.Started != nil {
		opts.Started(rep.Baseline, len(schedules))
	}
	for _, f := range schedules {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		w, err := run(ctx, s, c.Before, changes, []plugintest.Fault{f})
		if err != nil {
			return nil, err
		}
		r := w.summary([]plugintest.Fault{f})
		if len(r.Problems) == 0 {
			r.Problems = comparePhases(base, w, changes)
		}
		rep.Schedules++
		if len(r.Problems) > 0 {
			rep.Failed = append(rep.Failed, r)
		}
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// RunCase runs an exploring case (Case.Explore): without faults, then under its schedule, and
// says how the two differ, as a case's outcome.
func RunCase(ctx context.Context, s *plugintest.Suite, c plugintest.Case) (plugintest.Outcome, error) {
	start := time.Now()
	out := plugintest.Outcome{Case: c.Name}
	changes := changesOf(c)
	base, err := run(ctx, s, c.Before, changes, nil)
	if err != nil {
		return out, err
	}
	for _, p := range base.failures {
		out.Failures = append(out.Failures, "without faults: "+p)
	}
	if len(out.Failures) > 0 || len(c.Explore.Faults) == 0 {
		out.Failures = append(out.Failures, checkEnd(c, base)...)
		out.Duration = time.Since(start)
		return out, nil
	}
	w, err := run(ctx, s, c.Before, changes, c.Explore.Faults)
	if err != nil {
		return out, err
	}
	out.Failures = append(out.Failures, w.failures...)
	for i, f := range c.Explore.Faults {
		switch {
		case w.struck[i]:
		case f.Reconcile > w.reconciles && len(w.failures) == 0:
			// The case no longer fits the plugin: it tests nothing.
			out.Failures = append(out.Failures, fmt.Sprintf("explore.faults[%d]: %s never struck: the run made only %d reconciles (the plugin or the case changed since the case was saved: explore it again)",
				i, f, w.reconciles))
		case f.Reconcile <= w.reconciles:
			// The plugin no longer does what the fault struck (a fix may have removed it).
			out.Notes = append(out.Notes, fmt.Sprintf("explore.faults[%d]: %s never struck: %s", i, f, strikes(w, f)))
		}
	}
	if len(w.failures) == 0 {
		out.Failures = append(out.Failures, comparePhases(base, w, changes)...)
	}
	out.Failures = append(out.Failures, checkEnd(c, w)...)
	out.Duration = time.Since(start)
	return out, nil
}

// strikes says what a fault's reconcile did instead.
func strikes(w *world, f plugintest.Fault) string {
	l := w.log[f.Reconcile-1]
	switch f.Type {
	case plugintest.FaultStale:
		return fmt.Sprintf("and reconcile %d (of %s) read no earlier version of %s there", f.Reconcile, l.req, f.Object)
	case plugintest.FaultConflict, plugintest.FaultCrash:
		return fmt.Sprintf("and reconcile %d (of %s) made %d writes", f.Reconcile, l.req, len(l.writes))
	}
	return "none of its kind"
}

func changesOf(c plugintest.Case) []plugintest.Change {
	if c.Explore == nil {
		return nil
	}
	return c.Explore.Changes
}

// run drives the plugin from before through changes, with the faults of schedule.
func run(ctx context.Context, s *plugintest.Suite, before []map[string]any, changes []plugintest.Change, schedule []plugintest.Fault) (*world, error) {
	start := time.Now()
	w, err := newWorld(ctx, s, before, schedule)
	if err != nil {
		return nil, err
	}
	w.relist()
	ok := w.settle(ctx) && w.check(ctx)
	if ok {
		w.phases = append(w.phases, phase{endState(w), maps.Clone(w.creations)})
	}
	for i := 0; ok && i < len(changes); i++ {
		at := []plugintest.Change{changes[i]}
		if j := slices.IndexFunc(schedule, func(f plugintest.Fault) bool { return f.Type == plugintest.FaultCoalesce && f.Change == i+1 }); j >= 0 && i+1 < len(changes) {
			w.struck[j] = true
			at = append(at, changes[i+1])
			i++
		}
		if err := w.change(at); err != nil {
			return nil, fmt.Errorf("explore.changes[%d]: %w", i, err)
		}
		w.perKey = map[key]int{}
		if ok = w.settle(ctx) && w.check(ctx); ok {
			w.phases = append(w.phases, phase{endState(w), maps.Clone(w.creations)})
		}
	}
	w.duration = time.Since(start)
	if w.refused != nil {
		return nil, w.refused
	}
	return w, nil
}

func (w *world) summary(faults []plugintest.Fault) Run {
	r := Run{Faults: faults, Reconciles: w.reconciles, Problems: slices.Clone(w.failures), Duration: w.duration}
	for _, l := range w.log {
		r.Writes += len(l.writes)
	}
	return r
}

// change makes a user's changes at once, then delivers their events: of each object, from what
// it was before the first to what it is after the last.
func (w *world) change(changes []plugintest.Change) error {
	var touched []key
	olds := map[key][]byte{}
	for _, ch := range changes {
		var k key
		var apiVersion string
		if ch.Put != nil {
			r := plugintest.RefOf(ch.Put)
			k, apiVersion = keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name), r.APIVersion
		} else {
			r := ch.Delete
			k, apiVersion = keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name), r.APIVersion
		}
		if _, ok := w.kinds[key{group: k.group, kind: k.kind}]; !ok {
			w.kinds[key{group: k.group, kind: k.kind}] = apiVersion
		}
		if _, ok := olds[k]; !ok {
			olds[k] = w.current(k)
			touched = append(touched, k)
		}
		if ch.Delete != nil {
			if w.current(k) == nil {
				hint := ""
				if k.namespace == "" {
					hint = ": give its namespace, if its kind is namespaced"
				}
				return fmt.Errorf("delete: %s does not exist then%s", k, hint)
			}
			w.removeQuietly(k, apiVersion)
			continue
		}
		if err := w.put(k, ch.Put); err != nil {
			return fmt.Errorf("put: %w", err)
		}
	}
	for _, k := range touched {
		now := w.current(k)
		w.record(k, now, olds[k] == nil && now != nil)
		w.observe(olds[k], now)
	}
	w.collect()
	return nil
}

// put creates or replaces object k as a user's replace does: what the API server keeps (uid,
// creation time, status, finalizers and owners unless given) is kept, and the generation moves
// on with a change other than metadata and status.
func (w *world) put(k key, o map[string]any) error {
	o = deepCopy(o).(map[string]any)
	if cur := w.current(k); cur != nil {
		var old map[string]any
		_ = json.Unmarshal(cur, &old)
		md, _ := o["metadata"].(map[string]any)
		omd := old["metadata"].(map[string]any)
		for _, f := range []string{"uid", "creationTimestamp", "finalizers", "ownerReferences", "deletionTimestamp"} {
			if _, given := md[f]; !given && omd[f] != nil {
				md[f] = omd[f]
			}
		}
		if s, ok := old["status"]; ok {
			o["status"] = s
		}
		gen, _ := omd["generation"].(float64)
		if specOf(old) != specOf(o) {
			gen++
		}
		md["generation"] = gen
	}
	return plugintest.Put(w.cluster, o)
}

func specOf(o map[string]any) string {
	rest := map[string]any{}
	for k, v := range o {
		if k != "apiVersion" && k != "kind" && k != "metadata" && k != "status" {
			rest[k] = v
		}
	}
	b, _ := json.Marshal(rest)
	return string(b)
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// removeQuietly deletes object k as a user does, its event left to the caller.
func (w *world) removeQuietly(k key, apiVersion string) {
	var o map[string]any
	_ = json.Unmarshal(w.current(k), &o)
	md := o["metadata"].(map[string]any)
	if f, _ := md["finalizers"].([]any); len(f) > 0 {
		if md["deletionTimestamp"] == nil {
			md["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
			md["deletionGracePeriodSeconds"] = 0
			_ = plugintest.Put(w.cluster, o)
		}
		return
	}
	w.cluster.Remove(apiVersion, k.kind, k.namespace, k.name)
}

// checkEnd checks a case's after and gone on a run's end state.
func checkEnd(c plugintest.Case, w *world) []string {
	var out []string
	for i, want := range c.After {
		r := plugintest.RefOf(want)
		got := w.current(keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name))
		if got == nil {
			out = append(out, fmt.Sprintf("after[%d] %s: not found", i, r))
			continue
		}
		var g map[string]any
		_ = json.Unmarshal(got, &g)
		for _, d := range plugintest.Match(want, g) {
			out = append(out, fmt.Sprintf("after[%d] %s: %s", i, r, d))
		}
	}
	for i, r := range c.Gone {
		if w.current(keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name)) != nil {
			out = append(out, fmt.Sprintf("gone[%d] %s: still there", i, r))
		}
	}
	return out
}

// endState is every object at the end of a run, by a name that is the same in every run (a
// generated name as its prefix and "*"), as JSON without what differs from run to run (uids,
// resourceVersions, generations, times).
func endState(w *world) map[string][]any {
	var all []map[string]any
	generated := map[string]string{} // a generated name -> its prefix and "*"
	for gk, apiVersion := range w.kinds {
		for _, o := range w.cluster.Objects(apiVersion, gk.kind) {
			all = append(all, o.Object)
			md, _ := o.Object["metadata"].(map[string]any)
			if g, _ := md["generateName"].(string); g != "" && strings.HasPrefix(plugintest.RefOf(o.Object).Name, g) {
				generated[plugintest.RefOf(o.Object).Name] = g + "*"
			}
		}
	}
	out := map[string][]any{}
	for _, o := range all {
		r := plugintest.RefOf(o)
		name := cmp.Or(generated[r.Name], r.Name)
		id := keyOf(r.APIVersion, r.Kind, r.Namespace, name).String()
		out[id] = append(out[id], stable(deepCopy(o), generated))
	}
	return out
}

// stable drops from a decoded object what differs between two runs that did the same; a
// generated name, wherever it is, becomes its prefix and "*".
func stable(v any, generated map[string]string) any {
	o, _ := v.(map[string]any)
	if md, ok := o["metadata"].(map[string]any); ok {
		for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} {
			delete(md, f)
		}
		if g, _ := md["generateName"].(string); g != "" {
			md["name"] = g + "*"
		}
		if md["deletionTimestamp"] != nil {
			md["deletionTimestamp"] = "(set)"
		}
		if refs, ok := md["ownerReferences"].([]any); ok {
			for _, r := range refs {
				if m, ok := r.(map[string]any); ok {
					delete(m, "uid")
				}
			}
		}
	}
	return untimed(o, generated)
}

// untimed replaces times (RFC 3339 strings) with "(a time)", and generated names.
func untimed(v any, generated map[string]string) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = untimed(e, generated)
		}
	case []any:
		for i, e := range v {
			v[i] = untimed(e, generated)
		}
	case string:
		if g, ok := generated[v]; ok {
			return g
		}
		if _, err := time.Parse(time.RFC3339, v); err == nil {
			return "(a time)"
		}
	}
	return v
}

// comparePhases compares the states a run settled in with those of the run without faults:
// once started, then after each change (after both, of two made at once), up to the first
// that differs.
func comparePhases(base, w *world, changes []plugintest.Change) []string {
	j := 0 // w's phase
	for i, want := range base.phases {
		if i > 0 && i < len(base.phases)-1 && slices.ContainsFunc(w.schedule, func(f plugintest.Fault) bool { return f.Type == plugintest.FaultCoalesce && f.Change == i }) {
			continue // w never settled between changes i and i+1
		}
		if j >= len(w.phases) {
			return []string{fmt.Sprintf("%s: the run stopped before it settled", phaseName(i, changes))}
		}
		if d := compareEnd(want, w.phases[j]); len(d) > 0 {
			for k := range d {
				d[k] = phaseName(i, changes) + ": " + d[k]
			}
			return d
		}
		j++
	}
	return nil
}

func phaseName(i int, changes []plugintest.Change) string {
	if i == 0 {
		return "settled at the start"
	}
	ch := changes[i-1]
	what := "put " + plugintest.RefOf(ch.Put).String()
	if ch.Delete != nil {
		what = "delete " + ch.Delete.String()
	}
	return fmt.Sprintf("settled after change %d (%s)", i, what)
}

// unmatched drops from a and b the objects both hold (as many times as both hold them), and
// returns the rest of each, ordered by their JSON.
func unmatched(a, b []any) ([]any, []any) {
	enc := func(v any) string { j, _ := json.Marshal(v); return string(j) }
	count := map[string]int{}
	for _, v := range b {
		count[enc(v)]++
	}
	var ra, rb []any
	for _, v := range a {
		if k := enc(v); count[k] > 0 {
			count[k]--
			continue
		}
		ra = append(ra, v)
	}
	for _, v := range b {
		if k := enc(v); count[k] > 0 {
			count[k]--
			rb = append(rb, v)
		}
	}
	byJSON := func(x, y any) int { return strings.Compare(enc(x), enc(y)) }
	slices.SortFunc(ra, byJSON)
	slices.SortFunc(rb, byJSON)
	return ra, rb
}

// compareEnd says how a run's end state differs from the run without faults: objects missing,
// extra, or with other fields, and objects deleted and created again.
func compareEnd(wantPhase, gotPhase phase) []string {
	want, got := wantPhase.objects, gotPhase.objects
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids {
		a, b := want[id], got[id]
		switch {
		case len(b) < len(a):
			out = append(out, fmt.Sprintf("%s: %d, without faults %d", id, len(b), len(a)))
		case len(b) > len(a):
			out = append(out, fmt.Sprintf("%s: %d, without faults %d", id, len(b), len(a)))
		default:
			// Objects of one generated prefix are not told apart by name: those the same in
			// both runs pair off, and the rest are compared in the order of their contents.
			a, b = unmatched(a, b)
			for i := range a {
				for _, d := range recording.DiffJSON(a[i], b[i]) {
					out = append(out, fmt.Sprintf("%s: %s (without faults -> with)", id, d))
				}
			}
		}
	}
	var again []string
	for k, n := range gotPhase.creations {
		if was := wantPhase.creations[k]; n > was && len(got[k.String()]) > 0 {
			again = append(again, fmt.Sprintf("%s was deleted and created again (created %d times, without faults %d)", k, n, was))
		}
	}
	slices.Sort(again)
	return append(out, again...)
}
