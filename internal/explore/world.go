package explore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/plugintest"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

// Bounds of one run.
const (
	// maxPerKey is how often one object may be reconciled between two changes (or before the
	// first) before the run is taken to loop.
	maxPerKey = 20
	// maxRetries is how often a failing reconcile is retried before the run gives up on it.
	maxRetries = 8
)

// key names an object: its API group, kind, namespace and name.
type key struct{ group, kind, namespace, name string }

func (k key) String() string {
	n := k.name
	if k.namespace != "" {
		n = k.namespace + "/" + n
	}
	if k.group == "" {
		return k.kind + " " + n
	}
	return k.kind + "." + k.group + " " + n
}

func keyOf(apiVersion, kind, namespace, name string) key {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return key{gv.Group, kind, namespace, name}
}

// watch is one of the manifest's watches, as the host's source of it.
type watch struct {
	role  string // "for", "owns" or "watches"
	group string
	kind  string
	mode  string // watches: abi.MapSameName, abi.MapNamespace or abi.MapFunc
	index int    // watches: its index in the manifest's
	preds []predicate.Predicate
}

// toMap is an object of a watch the plugin maps itself, waiting for no reconcile to run: its
// map export runs on the module's instance.
type toMap struct {
	watch  int
	object []byte
}

// reconcileLog is what one reconcile of the run did, from which schedules are made.
type reconcileLog struct {
	n      int
	req    key
	writes []writeLog
	stale  []staleRead // reads of objects that had a version before their latest write
	check  bool        // a reconcile of the check once settled: no fault strikes it
}

// staleRead is the read-th read of an object in a reconcile (a get, or a list holding it).
type staleRead struct {
	object key
	read   int
}

// writeLog is one write call, answered or not.
type writeLog struct {
	fn      string
	target  key
	existed bool // the object existed before it
}

// world is one run: the cluster, the module, the queue the host's workers take requests from,
// the faults to inject, and what the checks need.
type world struct {
	suite    *plugintest.Suite
	module   *wasm.Module
	cluster  *fake.Cluster
	forGK    key // group and kind of the For kind
	watches  []watch
	timeout  time.Duration
	schedule []plugintest.Fault

	queue   []key
	queued  map[key]bool
	toMap   []toMap // events to map by the plugin, in the order they came
	retries map[key]int
	perKey  map[key]int // reconciles since the last change

	kinds     map[key]string   // group and kind -> an apiVersion, of every object seen
	history   map[key][][]byte // versions of each object, oldest first; nil: absent
	creations map[key]int

	reconciles int
	duration   time.Duration
	refused    error // the host would refuse the plugin: no run can be made
	log        []reconcileLog
	failures   []string
	settled    bool // checking that settled objects get no writes

	// The reconcile in progress.
	cur     *reconcileLog
	made    int          // writes made (answered) in it
	crashed bool         // the host stopped in it
	served  []key        // objects it was answered stale
	struck  map[int]bool // the faults of the schedule that struck, by index

	writtenAt map[key]int  // the reconcile each object's latest version was written in (or after)
	shown     map[key]bool // whether a read has answered an object's latest version
	reads     map[key]int  // reads of each object in it
	wrote     []string

	// phases are the end states of the run: once settled at the start, then after each change.
	phases []phase
}

// phase is the state a run settled in.
type phase struct {
	objects   map[string][]any // endState
	creations map[key]int      // how often each object was created, up to then
}

func newWorld(ctx context.Context, s *plugintest.Suite, before []map[string]any, schedule []plugintest.Fault) (*world, error) {
	m := s.Manifest()
	w := &world{
		suite: s, module: s.Module(), timeout: s.Options().Timeout, schedule: schedule,
		queued: map[key]bool{}, retries: map[key]int{}, perKey: map[key]int{},
		kinds: map[key]string{}, history: map[key][][]byte{}, creations: map[key]int{}, struck: map[int]bool{},
		writtenAt: map[key]int{}, shown: map[key]bool{},
	}
	var err error
	if w.cluster, err = s.NewCluster(before); err != nil {
		return nil, err
	}
	add := func(role string, wt abi.Watch, index int) error {
		preds, err := predicate.FromManifest(wt.Predicates)
		if err != nil {
			return fmt.Errorf("%s %s: %w", role, wt.Kind, err)
		}
		k := keyOf(wt.APIVersion, wt.Kind, "", "")
		w.watches = append(w.watches, watch{role: role, group: k.group, kind: k.kind, mode: wt.Map, index: index, preds: preds})
		w.kinds[key{group: k.group, kind: k.kind}] = wt.APIVersion
		return nil
	}
	if err := add("for", m.For, 0); err != nil {
		return nil, err
	}
	w.forGK = keyOf(m.For.APIVersion, m.For.Kind, "", "")
	for _, o := range m.Owns {
		if err := add("owns", o, 0); err != nil {
			return nil, err
		}
	}
	for i, o := range m.Watches {
		if err := add("watches", o, i); err != nil {
			return nil, err
		}
	}
	for _, o := range before {
		r := plugintest.RefOf(o)
		k := keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name)
		w.kinds[key{group: k.group, kind: k.kind}] = r.APIVersion
		w.history[k] = [][]byte{w.current(k)}
	}
	// Every run starts on new instances: nothing of another run is in their memory.
	if err := w.restartModule(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// current is object k as stored now, as JSON; nil if there is none.
func (w *world) current(k key) []byte {
	apiVersion := w.kinds[key{group: k.group, kind: k.kind}]
	if apiVersion == "" {
		apiVersion = schema.GroupVersion{Group: k.group, Version: "v1"}.String()
	}
	o, ok := w.cluster.Get(apiVersion, k.kind, k.namespace, k.name)
	if !ok {
		return nil
	}
	b, _ := json.Marshal(o.Object)
	return b
}

// restartModule drops the module's instances: the next reconcile starts a new one.
func (w *world) restartModule(ctx context.Context) error {
	if err := w.module.Retire(ctx); err != nil {
		return err
	}
	w.module.Reactivate()
	return nil
}

// relist enqueues every object of the For kind, as a starting host's informers do.
func (w *world) relist() {
	apiVersion := w.kinds[key{group: w.forGK.group, kind: w.forGK.kind}]
	for _, o := range w.cluster.Objects(apiVersion, w.forGK.kind) {
		r := plugintest.RefOf(o.Object)
		w.enqueue(key{w.forGK.group, w.forGK.kind, r.Namespace, r.Name})
	}
}

func (w *world) enqueue(k key) {
	if ns := w.suite.Options().Namespaces; len(ns) > 0 && k.namespace != "" && !slices.Contains(ns, k.namespace) {
		return
	}
	if !w.queued[k] {
		w.queued[k] = true
		w.queue = append(w.queue, k)
	}
}

// mapEvents maps the events of watches the plugin maps itself by its map export, and enqueues
// what it returns. A map that fails is a failure of the run.
func (w *world) mapEvents(ctx context.Context) {
	for len(w.toMap) > 0 {
		e := w.toMap[0]
		w.toMap = w.toMap[1:]
		ctx, cancel := context.WithTimeout(ctx, w.timeout)
		reqs, err := w.module.Map(ctx, &wasm.Call{Host: mapHost{w.cluster}, Logger: logr.Discard(), Map: &recording.MapInput{Watch: uint32(e.watch), Object: e.object}})
		cancel()
		if err != nil {
			o := unstructuredOf(e.object)
			w.fail("the map function of watches[%d] failed on %s %s: %v", e.watch, o.GetKind(), key{namespace: o.GetNamespace(), name: o.GetName()}, err)
			continue
		}
		for _, r := range reqs {
			w.enqueue(key{w.forGK.group, w.forGK.kind, r.Namespace, r.Name})
		}
	}
}

// mapHost serves a map function's calls: reads from the cluster as it is; no writes.
type mapHost struct{ cluster *fake.Cluster }

func (h mapHost) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	if fn != abi.ImportGet && fn != abi.ImportList {
		return abi.StatusBadRequest, []byte(fn + ": a map function may only read (get, list)")
	}
	return h.cluster.Call(ctx, fn, req)
}

// settle reconciles until the queue is empty (requeues after a delay are left: the check that
// follows reconciles every object anyway). It returns false when the run has stopped.
func (w *world) settle(ctx context.Context) bool {
	for w.mapEvents(ctx); len(w.queue) > 0; w.mapEvents(ctx) {
		k := w.queue[0]
		w.queue = w.queue[1:]
		delete(w.queued, k)
		w.perKey[k]++
		if w.perKey[k] > maxPerKey {
			w.fail("loop: %s was reconciled %d times without the plugin settling; its last reconcile wrote %s", k, maxPerKey, orNothing(w.lastWrites(k)))
			return false
		}
		if !w.reconcile(ctx, k) {
			return false
		}
	}
	return true
}

// check reconciles every object of the For kind once more, as a resync would: a settled plugin
// writes nothing.
func (w *world) check(ctx context.Context) bool {
	apiVersion := w.kinds[key{group: w.forGK.group, kind: w.forGK.kind}]
	w.settled = true
	defer func() { w.settled = false }()
	for _, o := range w.cluster.Objects(apiVersion, w.forGK.kind) {
		r := plugintest.RefOf(o.Object)
		k := key{w.forGK.group, w.forGK.kind, r.Namespace, r.Name}
		if ns := w.suite.Options().Namespaces; len(ns) > 0 && !slices.Contains(ns, k.namespace) {
			continue
		}
		w.wrote = nil
		if !w.reconcile(ctx, k) {
			return false
		}
		if len(w.wrote) > 0 {
			w.fail("not idempotent: reconciled again once settled, %s wrote %s", k, strings.Join(w.wrote, ", "))
			return false
		}
	}
	return true
}

func (w *world) lastWrites(k key) []string {
	for i := len(w.log) - 1; i >= 0; i-- {
		if w.log[i].req == k {
			var out []string
			for _, wr := range w.log[i].writes {
				out = append(out, wr.fn+" "+wr.target.String())
			}
			return out
		}
	}
	return nil
}

func orNothing(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

func (w *world) fail(format string, args ...any) {
	w.failures = append(w.failures, fmt.Sprintf(format, args...))
}

// faultHere reports whether the schedule holds a fault of type t for the reconcile in progress
// (and match, if given, takes it), and notes that it struck.
func (w *world) faultHere(t string, match func(plugintest.Fault) bool) bool {
	if w.cur.check {
		return false
	}
	for i, f := range w.schedule {
		if f.Type == t && f.Reconcile == w.cur.n && (match == nil || match(f)) {
			w.struck[i] = true
			return true
		}
	}
	return false
}

// names reports whether a fault's object reference names object k: by its name, or for an
// object with a generated name, by its prefix and "*" (a generated name differs from run to run).
func (w *world) names(r *plugintest.Ref, k key) bool {
	if r == nil {
		return false
	}
	rk := keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name)
	if prefix, ok := strings.CutSuffix(r.Name, "*"); ok {
		rk.name = k.name
		return rk == k && prefix != "" && w.generateName(k) == prefix
	}
	return rk == k
}

// generateName is the prefix object k's name was generated from, "" if none.
func (w *world) generateName(k key) string {
	h := w.history[k]
	for i := len(h) - 1; i >= 0; i-- {
		if u := unstructuredOf(h[i]); u != nil {
			return u.GetGenerateName()
		}
	}
	return ""
}

// refName names object k in a fault: a generated name by its prefix and "*".
func (w *world) refName(k key) string {
	if g := w.generateName(k); g != "" && strings.HasPrefix(k.name, g) {
		return g + "*"
	}
	return k.name
}

// reconcile runs one reconcile of k, and acts on its result as the host's controller does. It
// returns false when the run has stopped.
func (w *world) reconcile(ctx context.Context, k key) bool {
	w.reconciles++
	w.cur = &reconcileLog{n: w.reconciles, req: k, check: w.settled}
	w.made, w.crashed, w.served, w.reads = 0, false, nil, map[key]int{}
	req := abi.Request{Namespace: k.namespace, Name: k.name, Retries: uint32(w.retries[k])}
	var (
		res    abi.Result
		runErr error
	)
	_, err := w.cluster.Reconcile(ctx, wasmrec.ReconcilerFunc(func(ctx context.Context, _ wasmrec.Request) (wasmrec.Result, error) {
		ctx, cancel := context.WithTimeout(ctx, w.timeout)
		defer cancel()
		res, runErr = w.module.Reconcile(ctx, &wasm.Call{Request: req, Host: w, Logger: logr.Discard()})
		return wasmrec.Result{}, nil
	}), wasmrec.Request{NamespacedName: types.NamespacedName{Namespace: k.namespace, Name: k.name}, Retries: int(req.Retries)})
	w.log = append(w.log, *w.cur)
	if err != nil { // the host would refuse the plugin
		w.refused = fmt.Errorf("%w: %s", plugintest.ErrRefused, strings.TrimPrefix(err.Error(), "fake: the host would refuse this plugin: "))
		return false
	}
	if !w.crashed && w.faultHere(plugintest.FaultCrash, nil) {
		w.crashed = true // after its last write: its result is lost with the host
	}
	// The cache catches up: the events of the objects read stale come now.
	for _, s := range w.served {
		h := w.history[s]
		w.observe(h[len(h)-2], h[len(h)-1])
	}
	if w.crashed {
		return w.restart(ctx)
	}
	if runErr != nil {
		w.fail("limits: reconcile %d of %s did not return: %v", w.cur.n, k, runErr)
		return false
	}
	switch {
	case res.Failed && !res.Terminal:
		w.retries[k]++
		if w.retries[k] > maxRetries {
			w.fail("does not settle: reconcile of %s failed %d times in a row: %s", k, w.retries[k], firstLine(res.Err))
			return false
		}
		w.enqueue(k)
	case res.Requeue && !res.Failed:
		w.retries[k]++
		w.enqueue(k)
	default:
		delete(w.retries, k)
	}
	return true
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// restart is the host starting again: new instances, an empty queue, every object listed.
func (w *world) restart(ctx context.Context) bool {
	if err := w.restartModule(ctx); err != nil {
		w.fail("restarting the module: %v", err)
		return false
	}
	w.queue, w.queued, w.retries = nil, map[key]bool{}, map[key]int{}
	w.relist()
	return true
}

// Call serves one of the guest's host calls: through the cluster, with the faults of the
// reconcile injected, and each write's watch event delivered.
func (w *world) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	if w.crashed {
		return abi.StatusUnavailable, []byte(fn + ": the host has stopped")
	}
	switch fn {
	case abi.ImportGet, abi.ImportList:
		return w.read(ctx, fn, req)
	case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus, abi.ImportPatch, abi.ImportDelete:
		return w.write(ctx, fn, req)
	}
	return w.cluster.Call(ctx, fn, req)
}

// read answers a get or a list, stale for an object the schedule says.
func (w *world) read(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	status, resp := w.cluster.Call(ctx, fn, req)
	var r abi.ObjectRef // a get's; a list's apiVersion, kind and namespace
	if json.Unmarshal(req, &r) != nil {
		return status, resp
	}
	if fn == abi.ImportGet {
		k := keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name)
		if status != abi.StatusOK && status != abi.StatusNotFound {
			return status, resp
		}
		w.noteRead(k)
		old, stale := w.staleVersion(k)
		if !stale {
			return status, resp
		}
		if old == nil {
			return abi.StatusNotFound, fmt.Appendf(nil, "%s %q not found", k.kind, k.name)
		}
		return abi.StatusOK, old
	}
	if status != abi.StatusOK {
		return status, resp
	}
	var list abi.ListResponse
	if json.Unmarshal(resp, &list) != nil {
		return status, resp
	}
	gk := keyOf(r.APIVersion, r.Kind, "", "")
	changed := false
	var items []json.RawMessage
	seen := map[key]bool{}
	for _, it := range list.Items {
		var o map[string]any
		_ = json.Unmarshal(it, &o)
		ref := plugintest.RefOf(o)
		k := key{gk.group, gk.kind, ref.Namespace, ref.Name}
		seen[k] = true
		w.noteRead(k)
		if old, stale := w.staleVersion(k); stale {
			changed = true
			if old != nil {
				items = append(items, old)
			}
			continue
		}
		items = append(items, it)
	}
	// An object deleted by its latest write is still in a stale list.
	var gone []key
	for k, h := range w.history {
		if k.group == gk.group && k.kind == gk.kind && !seen[k] && (r.Namespace == "" || k.namespace == r.Namespace) && h[len(h)-1] == nil {
			gone = append(gone, k)
		}
	}
	slices.SortFunc(gone, func(a, b key) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range gone {
		w.noteRead(k)
		if old, stale := w.staleVersion(k); stale && old != nil {
			changed = true
			items = append(items, old)
		}
	}
	if !changed {
		return status, resp
	}
	b, _ := json.Marshal(abi.ListResponse{Items: append([]json.RawMessage{}, items...)})
	return abi.StatusOK, b
}

// noteRead counts a read of object k, and notes in the run's log a read that could be stale.
func (w *world) noteRead(k key) {
	w.reads[k]++
	if w.lagging(k) {
		w.cur.stale = append(w.cur.stale, staleRead{k, w.reads[k]})
	}
}

// lagging reports whether a cache could still hold object k's version before its latest: the
// latest was written in this reconcile or the one before it (or by a user since), and no read
// has shown it yet. A cache catches up, and never goes back to a version it has shown.
func (w *world) lagging(k key) bool {
	return len(w.history[k]) >= 2 && !w.shown[k] && w.writtenAt[k] >= w.cur.n-1
}

// staleVersion is k's version before its latest write, if the schedule reads k stale here.
func (w *world) staleVersion(k key) ([]byte, bool) {
	h := w.history[k]
	if !w.lagging(k) {
		w.shown[k] = true
		return nil, false
	}
	if !w.faultHere(plugintest.FaultStale, func(f plugintest.Fault) bool {
		return w.names(f.Object, k) && (f.Read == 0 || f.Read == w.reads[k])
	}) {
		w.shown[k] = true
		return nil, false
	}
	if !slices.Contains(w.served, k) {
		w.served = append(w.served, k)
	}
	return h[len(h)-2], true
}

// write makes a write, or crashes or conflicts where the schedule says, and delivers its event.
func (w *world) write(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	target, ok := writeTarget(fn, req)
	if !ok || dryRun(fn, req) { // the cluster says what is wrong with it; a dry run stores nothing
		return w.cluster.Call(ctx, fn, req)
	}
	if w.faultHere(plugintest.FaultCrash, func(f plugintest.Fault) bool { return f.AfterWrites == w.made }) {
		w.crashed = true
		return abi.StatusUnavailable, []byte(fn + ": the host has stopped")
	}
	w.made++
	old := w.current(target)
	w.cur.writes = append(w.cur.writes, writeLog{fn, target, old != nil})
	if fn != abi.ImportCreate && w.faultHere(plugintest.FaultConflict, func(f plugintest.Fault) bool { return f.Write == w.made }) {
		if cur := old; cur != nil {
			// Another writer got there first: the object's resourceVersion moves on.
			var o map[string]any
			_ = json.Unmarshal(cur, &o)
			if err := plugintest.Put(w.cluster, o); err == nil {
				w.record(target, w.current(target), false)
			}
			return abi.StatusConflict, fmt.Appendf(nil, "Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again", target.kind, target.name)
		}
	}
	status, resp := w.cluster.Call(ctx, fn, req)
	if status != abi.StatusOK {
		return status, resp
	}
	if fn == abi.ImportCreate {
		var o map[string]any
		if json.Unmarshal(resp, &o) == nil {
			target.name = plugintest.RefOf(o).Name // generateName
		}
	}
	now := w.current(target)
	w.record(target, now, fn == abi.ImportCreate)
	if !jsonEqual(old, now) {
		w.wrote = append(w.wrote, fn+" "+target.String()+changes(old, now))
	}
	w.observe(old, now)
	if now == nil || w.ownerGone(now) {
		w.collect()
	}
	return status, resp
}

// writeTarget is the object a write names.
func writeTarget(fn string, req []byte) (key, bool) {
	switch fn {
	case abi.ImportPatch, abi.ImportDelete:
		var r abi.ObjectRef
		if json.Unmarshal(req, &r) != nil || r.Name == "" {
			return key{}, false
		}
		return keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name), true
	}
	obj, _, err := abi.SplitWrite(req)
	var o map[string]any
	if err != nil || json.Unmarshal(obj, &o) != nil {
		return key{}, false
	}
	r := plugintest.RefOf(o)
	if r.APIVersion == "" || r.Kind == "" {
		return key{}, false
	}
	return keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name), true
}

// dryRun reports a write that asks for a dry run (ABI.md, "Write options").
func dryRun(fn string, req []byte) bool {
	var o abi.WriteOptions
	switch fn {
	case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus:
		_, wo, err := abi.SplitWrite(req)
		return err == nil && wo.DryRun
	}
	return json.Unmarshal(req, &o) == nil && o.DryRun
}

// record adds object k's new version to its history.
func (w *world) record(k key, now []byte, created bool) {
	if _, ok := w.kinds[key{group: k.group, kind: k.kind}]; !ok && now != nil {
		var o map[string]any
		_ = json.Unmarshal(now, &o)
		w.kinds[key{group: k.group, kind: k.kind}] = plugintest.RefOf(o).APIVersion
	}
	h := w.history[k]
	if len(h) == 0 && now != nil {
		h = [][]byte{nil} // absent before it was created
	}
	if len(h) > 0 && jsonEqual(h[len(h)-1], now) {
		return
	}
	w.history[k] = append(h, now)
	w.writtenAt[k], w.shown[k] = w.reconciles, false
	if created {
		w.creations[k]++
	}
}

// changes says how an object changed, in a few fields: " (status.size: "1" -> "2")".
func changes(old, now []byte) string {
	switch {
	case old == nil:
		return " (created)"
	case now == nil:
		return " (deleted)"
	}
	var a, b map[string]any
	_ = json.Unmarshal(old, &a)
	_ = json.Unmarshal(now, &b)
	for _, o := range []map[string]any{a, b} {
		if md, ok := o["metadata"].(map[string]any); ok {
			delete(md, "resourceVersion")
			delete(md, "managedFields")
			delete(md, "generation")
		}
	}
	d := recording.DiffJSON(a, b)
	if len(d) > 3 {
		d = append(d[:3], "...")
	}
	if len(d) == 0 {
		return ""
	}
	return " (" + strings.Join(d, "; ") + ")"
}

func jsonEqual(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(b, &y)
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// observe delivers the watch event of an object going from old to now (nil: absent) to the
// manifest's watches: their predicates, then their handlers.
func (w *world) observe(old, now []byte) {
	oldObj, newObj := unstructuredOf(old), unstructuredOf(now)
	var obj *unstructured.Unstructured
	if obj = newObj; obj == nil {
		obj = oldObj
	}
	if obj == nil {
		return
	}
	gvk := obj.GroupVersionKind()
	for _, wt := range w.watches {
		if wt.group != gvk.Group || wt.kind != gvk.Kind || !passes(wt.preds, oldObj, newObj) {
			continue
		}
		switch wt.role {
		case "for":
			w.enqueue(key{wt.group, wt.kind, obj.GetNamespace(), obj.GetName()})
		case "owns":
			for _, o := range []*unstructured.Unstructured{oldObj, newObj} {
				if o == nil {
					continue
				}
				for _, ref := range o.GetOwnerReferences() {
					gv, _ := schema.ParseGroupVersion(ref.APIVersion)
					if ref.Controller != nil && *ref.Controller && gv.Group == w.forGK.group && ref.Kind == w.forGK.kind {
						w.enqueue(key{w.forGK.group, w.forGK.kind, o.GetNamespace(), ref.Name})
					}
				}
			}
		case "watches":
			if wt.mode == abi.MapFunc { // the old object and the new, as the host's handler maps them
				for _, b := range [][]byte{old, now} {
					if b != nil {
						w.toMap = append(w.toMap, toMap{watch: wt.index, object: b})
					}
				}
				continue
			}
			if wt.mode == abi.MapSameName {
				w.enqueue(key{w.forGK.group, w.forGK.kind, obj.GetNamespace(), obj.GetName()})
				continue
			}
			apiVersion := w.kinds[key{group: w.forGK.group, kind: w.forGK.kind}]
			for _, f := range w.cluster.Objects(apiVersion, w.forGK.kind) {
				if r := plugintest.RefOf(f.Object); r.Namespace == obj.GetNamespace() {
					w.enqueue(key{w.forGK.group, w.forGK.kind, r.Namespace, r.Name})
				}
			}
		}
	}
}

func unstructuredOf(b []byte) *unstructured.Unstructured {
	if b == nil {
		return nil
	}
	u := &unstructured.Unstructured{}
	if u.UnmarshalJSON(b) != nil {
		return nil
	}
	return u
}

func passes(preds []predicate.Predicate, old, now *unstructured.Unstructured) bool {
	for _, p := range preds {
		var ok bool
		switch {
		case old == nil:
			ok = p.Create(event.CreateEvent{Object: now})
		case now == nil:
			ok = p.Delete(event.DeleteEvent{Object: old})
		default:
			ok = p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: now})
		}
		if !ok {
			return false
		}
	}
	return true
}

// ownerGone reports whether object o names an owner that is not there (by uid): the garbage
// collector deletes an object whose owners are all gone.
func (w *world) ownerGone(o []byte) bool {
	u := unstructuredOf(o)
	if u == nil {
		return false
	}
	for _, r := range u.GetOwnerReferences() {
		gv, _ := schema.ParseGroupVersion(r.APIVersion)
		owner := unstructuredOf(w.current(key{gv.Group, r.Kind, u.GetNamespace(), r.Name}))
		if owner == nil {
			owner = unstructuredOf(w.current(key{gv.Group, r.Kind, "", r.Name})) // a cluster-scoped owner
		}
		if owner == nil || owner.GetUID() != r.UID {
			return true
		}
	}
	return false
}

// collect is the garbage collector: an object whose owners are all gone is deleted (marked,
// if it has finalizers), and so on down.
func (w *world) collect() {
	for {
		live := map[string]bool{}
		var all []map[string]any
		for gk, apiVersion := range w.kinds {
			for _, o := range w.cluster.Objects(apiVersion, gk.kind) {
				all = append(all, o.Object)
				if md, ok := o.Object["metadata"].(map[string]any); ok {
					uid, _ := md["uid"].(string)
					live[uid] = true
				}
			}
		}
		slices.SortFunc(all, func(a, b map[string]any) int {
			ra, rb := plugintest.RefOf(a), plugintest.RefOf(b)
			return cmp.Or(strings.Compare(ra.Kind, rb.Kind), strings.Compare(ra.Namespace, rb.Namespace), strings.Compare(ra.Name, rb.Name))
		})
		removed := false
		for _, o := range all {
			u := &unstructured.Unstructured{Object: o}
			refs := u.GetOwnerReferences()
			if len(refs) == 0 || u.GetDeletionTimestamp() != nil {
				continue
			}
			orphan := true
			for _, r := range refs {
				orphan = orphan && !live[string(r.UID)]
			}
			if orphan {
				r := plugintest.RefOf(o)
				w.remove(keyOf(r.APIVersion, r.Kind, r.Namespace, r.Name), r.APIVersion)
				removed = true
			}
		}
		if !removed {
			return
		}
	}
}

// remove deletes an object as the API server does for a user or the garbage collector, and
// delivers its event.
func (w *world) remove(k key, apiVersion string) {
	old := w.current(k)
	if old == nil {
		return
	}
	var o map[string]any
	_ = json.Unmarshal(old, &o)
	u := &unstructured.Unstructured{Object: o}
	if len(u.GetFinalizers()) > 0 {
		if u.GetDeletionTimestamp() == nil {
			md := o["metadata"].(map[string]any)
			md["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
			md["deletionGracePeriodSeconds"] = 0
			_ = plugintest.Put(w.cluster, o)
		}
	} else {
		w.cluster.Remove(apiVersion, k.kind, k.namespace, k.name)
	}
	now := w.current(k)
	w.record(k, now, false)
	w.observe(old, now)
}
