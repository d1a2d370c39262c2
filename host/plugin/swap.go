package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/plugin/internal/modsource"
	"github.com/wasmrec/wasmrec/host/plugin/internal/versions"
	"github.com/wasmrec/wasmrec/host/plugin/internal/watches"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// Swap replaces the plugin's module with wasmBytes without stopping it: the new module is
// compiled, checked against ABI v1, smoke-instantiated and its manifest checked against the
// grant; the informers its watches need are started and synced; then new reconciles use it
// while in-flight ones finish on the old one, which is retired in the background, and every
// object of the For kind is enqueued so the new logic converges the world. The queue and the
// informers stay. If any step fails the current module and its watches keep serving and the
// error says why. A swap to the digest already running does nothing; one to a module refused
// before for what it is (its ABI, manifest or permissions) is refused again without being
// compiled, reported or counted again.
//
// With a rollout (Config.Rollout), a new version does not take every key at once: it begins its
// rollout, and the live version serves on beside it until it is promoted or rolled back. A
// version that served before (kept compiled) is swapped back at once, rollout or not.
func (p *Plugin) Swap(ctx context.Context, wasmBytes []byte) error {
	return p.swap(ctx, wasmBytes, "", nil)
}

// serving says whether digest is the live version's or the running rollout's candidate's.
func (p *Plugin) serving(digest string) bool {
	ro := p.ro.Load()
	return digest == p.Module().Digest() || (ro != nil && ro.cand.mod.Digest() == digest)
}

// swapToServing is a swap to the version serving already, or to the rollout's candidate: nothing
// to compile. It checks again under the swap lock, and returns false if another swap has
// published since (the swap then goes the long way).
func (p *Plugin) swapToServing(digest, onlyFrom string, to *modsource.Source) bool {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	if !p.serving(digest) {
		return false
	}
	if onlyFrom == "" || p.ModuleRef() == onlyFrom {
		if digest == p.Module().Digest() { // back to the live version: a rollout running ends
			p.endRolloutLocked(p.ro.Load(), StageAborted, "the plugin's module is the live version's again", false)
			// A refusal of what the source held in between no longer applies.
			p.log.Info("the new module is the one serving already: nothing to swap", "serving", p.Module().ShortDigest())
			if p.cfg.Hooks.OnSwap != nil {
				p.cfg.Hooks.OnSwap(SwapEvent{From: digest, To: digest, Unchanged: true})
			}
		}
		p.setSource(to)
	}
	return true
}

// swapSyncTimeout bounds how long a swap waits for its new watches' informers to sync.
const swapSyncTimeout = 30 * time.Second

// swap is Swap for the triggers. A non-empty onlyFrom skips the swap unless the plugin's source
// is still onlyFrom (a trigger acting on a source the plugin has left must not move it back); a
// non-nil to becomes the plugin's source once its module serves.
//
// Compiling happens before the swap lock is taken, and retiring after it is let go: the lock
// is held only to check, start the new watches and publish, never while waiting on a guest.
func (p *Plugin) swap(ctx context.Context, wasmBytes []byte, onlyFrom string, to *modsource.Source) error {
	digest := digestOf(wasmBytes)
	if p.serving(digest) && p.swapToServing(digest, onlyFrom, to) {
		return nil
	}
	mod, err := p.kept.Take(digest) // a version swapped out lately: checked already, still compiled
	if err != nil {
		return err // refused before
	}
	start := time.Now()
	reused := mod != nil
	if p.cfg.Rollout != nil {
		p.host.oci.Keep(wasmBytes) // for a restart in the middle of its rollout
	}
	if !reused {
		var err error
		if p.host.metrics != nil {
			p.host.metrics.Compiles.WithLabelValues(p.cfg.Name).Inc()
		}
		if mod, err = p.host.engine.Compile(ctx, wasmBytes, p.moduleOptions()); err != nil {
			if overBudget(err) {
				// Not a refusal of the module: it is tried again (a tag's at each poll), and may
				// fit then. Said once per module.
				if said, _ := p.overBudgetSaid.Swap(digest).(string); said != digest {
					p.log.Error(err, "the new module does not fit the plugin's memory budget now; the current module keeps serving, and the new one is tried again", "serving", p.Module().ShortDigest())
				}
				return err
			}
			if ctx.Err() == nil {
				p.kept.Refuse(digest, err)
				p.host.oci.Forget(digest) // the host keeps no module it refused
			}
			return p.swapRefused(p.Module().Digest(), err) // it names the plugin
		}
	}
	// giveBack undoes the take above for a module that does not get to serve.
	giveBack := func() {
		if reused {
			p.kept.Keep(mod)
		} else {
			_ = mod.Close(context.WithoutCancel(ctx))
		}
	}

	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	if onlyFrom != "" && p.ModuleRef() != onlyFrom {
		giveBack()
		return nil
	}
	old := p.current.Load()
	if digest == old.mod.Digest() {
		giveBack()
		p.endRolloutLocked(p.ro.Load(), StageAborted, "the plugin's module is the live version's again", false)
		p.setSource(to)
		return nil
	}
	if ro := p.ro.Load(); ro != nil && ro.cand.mod.Digest() == digest {
		giveBack()
		p.setSource(to)
		return nil
	}
	next, srcs, err := p.checkSwap(ctx, old, mod)
	if err != nil {
		giveBack()
		if !errors.As(err, new(*passingError)) {
			p.kept.Refuse(digest, err)
			p.host.oci.Forget(digest)
		}
		return p.swapRefused(old.mod.Digest(), fmt.Errorf("plugin %q: %s: %w", p.cfg.Name, mod.ShortDigest(), err))
	}
	if srcs != nil {
		// Held for the whole swap: the rollout it ends below lets go of what that rollout's
		// candidate watched, which these may watch too.
		for _, k := range srcs.Keys() {
			_, err = p.infs.Acquire(informers.List, k)
			if err != nil {
				break
			}
			defer p.infs.Release(informers.List, k)
		}
		if err == nil {
			err = p.startWatches(ctx, srcs)
		}
		if err != nil {
			giveBack() // not remembered: the API server may serve them later
			return p.swapRefused(old.mod.Digest(), fmt.Errorf("plugin %q: %s: %w", p.cfg.Name, mod.ShortDigest(), err))
		}
	}
	// A newer version ends the rollout of the one before it, which is not judged, once it is
	// sure to come in.
	if p.endRolloutLocked(p.ro.Load(), StageAborted, fmt.Sprintf("%s came in before it was through", mod.ShortDigest()), false) && srcs != nil {
		if err := p.warm.hold(srcs.Keys()); err != nil { // the end held warm what was current
			p.log.Error(err, "holding the informers of the new watches warm")
		}
	}
	p.rec.keepModule(mod, wasmBytes) // it serves now, or is a rollout's candidate
	if reused {
		mod.Reactivate()
	}
	if p.cfg.Rollout != nil && !reused {
		p.beginRollout(ctx, old, next, srcs)
	} else {
		p.publish(ctx, old, next, srcs, reused, start)
	}
	p.setSource(to)
	return nil
}

// publish makes next serve every key in place of old, under swapMu: srcs are next's sources if
// they differ from old's (added and synced already). The keys are all enqueued so the new logic
// converges the world, and old is retired once its reconciles are back and kept compiled, so
// that a swap back to it is immediate. Nothing waits for that.
func (p *Plugin) publish(ctx context.Context, old, next *version, srcs watches.Sources, rollback bool, start time.Time) {
	p.current.Store(next)
	if srcs != nil {
		p.finishWatches(srcs)
	}
	if p.cfg.Hooks.OnSwap != nil {
		p.cfg.Hooks.OnSwap(SwapEvent{From: old.mod.Digest(), To: next.mod.Digest(), Rollback: rollback})
	}
	p.log.Info("swapped the module", "from", old.mod.ShortDigest(), "to", next.mod.ShortDigest(), "rollback", rollback, "took", time.Since(start).Round(time.Millisecond))
	if running := p.ctrl.InFlight(); len(running) > 0 && !p.interruptible() {
		// They cannot be stopped: the new version gets their workers only when they return.
		p.log.Info("the old version still runs reconciles it may not be interrupted in: the new version gets their workers when they return",
			"running", len(running), "longest", time.Since(running[0].Since).Round(time.Millisecond))
	}
	if p.host.metrics != nil {
		p.host.metrics.Swaps.WithLabelValues(p.cfg.Name, "swapped").Inc()
	}
	p.enqueueAll(ctx, nil)
	go func() {
		_ = old.mod.Retire(context.Background())
		old.index.Close() // its guests are done; a swap back makes a version of its own
		p.kept.Keep(old.mod)
	}()
}

// SwapEvent is one swap attempt.
type SwapEvent struct {
	From, To string // module digests; To is empty for a refused swap
	// Rollback is true for a swap to a version that served before and was kept compiled.
	Rollback bool
	// Unchanged is true when the source holds the module serving already (From and To): there
	// was nothing to swap, and a refusal of what it held before no longer applies.
	Unchanged bool
	Err       error // what refused the swap; nil for one that happened
	// NotNow is true when Err did not refuse the module: it did not fit the plugin's memory
	// budget, and the module's tag or file is tried again until it does (told once a module).
	NotNow bool
}

func (p *Plugin) swapRefused(from string, err error) error {
	if p.cfg.Hooks.OnSwap != nil {
		p.cfg.Hooks.OnSwap(SwapEvent{From: from, Err: err})
	}
	return p.refused(err)
}

func (p *Plugin) refused(err error) error {
	p.log.Error(err, "module swap refused; the current module keeps serving", "serving", p.Module().ShortDigest())
	if p.host.metrics != nil {
		p.host.metrics.Swaps.WithLabelValues(p.cfg.Name, "refused").Inc()
	}
	return err
}

func (p *Plugin) moduleOptions() wasm.Options {
	return wasm.Options{
		Name:            p.cfg.Name,
		MaxInstances:    max(p.cfg.MaxConcurrentReconciles, 1),
		MemoryLimit:     quantity(p.cfg.MemoryLimit),
		RecycleAbove:    quantity(p.cfg.RecycleAbove),
		IdleTimeout:     idleTimeout(p.cfg.IdleTimeout),
		CodeIdleTimeout: idleTimeout(p.cfg.CodeIdleTimeout),
		Interruptible:   p.cfg.Interruptible,
		Snapshots:       p.cfg.Snapshots,
		Logger:          p.log,
		LogLimit:        p.cfg.LogLimit,
		CPU:             p.cfg.CPU,
		Code:            p.cfg.Code,
		Record:          p.rec != nil,
	}
}

// idleTimeout is the module's IdleTimeout (or CodeIdleTimeout) for the setting: unset, the
// default; 0s, never.
func idleTimeout(d *metav1.Duration) time.Duration {
	switch {
	case d == nil:
		return 0
	case d.Duration == 0:
		return -1
	}
	return d.Duration
}

// checkSwap checks mod as the successor of old under the one permission policy: it asks for no
// more than the grant, reconciles the same kind, and may list and watch every kind it watches,
// all served. If the watches change it returns the new sources.
func (p *Plugin) checkSwap(ctx context.Context, old *version, mod *wasm.Module) (*version, watches.Sources, error) {
	next, err := p.versionOf(mod)
	if err != nil {
		return nil, nil, err
	}
	if err := p.checkReads(ctx, next.policy, mod.Manifest()); err != nil {
		return nil, nil, &passingError{err} // the plugin's RBAC may be fixed
	}
	om, nm := old.mod.Manifest(), mod.Manifest()
	unresolved, err := next.policy.CheckWatches(nm, p.host.mgr.GetCache().RESTMapper())
	if err != nil {
		return nil, nil, err
	}
	watchesOf := func(m *abi.Manifest) string {
		b, _ := json.Marshal([]any{m.For, m.Owns, m.Watches})
		return string(b)
	}
	if watchesOf(om) == watchesOf(nm) {
		return next, nil, nil
	}
	if nm.For.APIVersion != om.For.APIVersion || nm.For.Kind != om.For.Kind {
		return nil, nil, fmt.Errorf("the new module reconciles %s %s, the running one %s %s: a plugin keeps its For kind: run the new module as another plugin, or start this one anew (restart the host or wasmrec dev, or delete and create its Plugin object)",
			nm.For.APIVersion, nm.For.Kind, om.For.APIVersion, om.For.Kind)
	}
	if len(unresolved) > 0 {
		return nil, nil, &passingError{fmt.Errorf("the new module watches %s, which the API server does not serve: install their CRDs first", kinds.GVKs(unresolved))}
	}
	srcs, err := p.sourcesFor(nm)
	if err != nil {
		return nil, nil, err
	}
	return next, srcs, nil
}

// passingError is a refusal for a reason outside the module (the plugin's RBAC, a CRD not
// installed): the module is tried again when asked, not remembered as refused.
type passingError struct{ error }

func (e *passingError) Unwrap() error { return e.error }

// startWatches is a swap's first half of moving to new sources: the informers of every new
// source are held and synced, and the new sources are added to the controller. If any of that
// fails, what was added is taken back and the error says what failed.
func (p *Plugin) startWatches(ctx context.Context, next watches.Sources) (err error) {
	var added []source.Source
	defer func() {
		if err == nil {
			return
		}
		for _, src := range added {
			_ = p.ctrl.Unwatch(src)
		}
		_ = p.warm.update()
	}()
	keys := next.Keys()
	if err := p.warm.hold(keys); err != nil {
		return fmt.Errorf("starting the informers of the new watches: %w", err)
	}
	// Where the controller runs, the swap waits for its own holds too (informers.List): a
	// replica that shares plugins runs no warmer unless it stands by warm, and the new sources
	// must not start on informers that have not synced. Where it does not, they sync when it
	// starts.
	uses := []informers.Use{informers.Warm}
	if p.Running() {
		uses = append(uses, informers.List)
	}
	syncCtx, cancel := context.WithTimeout(ctx, swapSyncTimeout)
	defer cancel()
	if err := p.waitForSync(syncCtx, uses...); err != nil {
		return fmt.Errorf("the informers of the new watches did not sync: %w", err)
	}
	for id, w := range next {
		if _, ok := p.srcs[id]; ok {
			continue
		}
		if err := p.ctrl.Watch(w.Src); err != nil {
			return fmt.Errorf("adding the new watch %s: %w", w.Src, err)
		}
		added = append(added, w.Src)
	}
	return nil
}

// finishWatches is a swap's second half, once the new module serves: sources the new module
// does not have stop, the informers only they used are released, and the plugin's kinds follow.
func (p *Plugin) finishWatches(next watches.Sources) {
	for id := range next {
		if cur, ok := p.srcs[id]; ok {
			next[id] = cur // unchanged: keep the running source
		}
	}
	for id, w := range p.srcs {
		if _, ok := next[id]; !ok {
			if err := p.ctrl.Unwatch(w.Src); err != nil {
				p.log.Error(err, "removing a watch after a swap")
			}
		}
	}
	p.srcs = next
	p.setKeys(next, nil)
	if err := p.warm.update(); err != nil {
		p.log.Error(err, "releasing the informers of the old watches")
	}
	p.checkHealth() // it may need other kinds now
	watched := p.Kinds()
	for _, f := range p.follows {
		f.SetKinds(watched)
	}
	p.log.Info("applied the new module's watches", "kinds", kinds.GVKs(watched))
}

// enqueueAll enqueues every object of the For kind the plugin sees: in its namespaces, let
// through by the running module's For predicates, and by only if set. It returns how many it
// enqueued; ok is false if it could not (the controller does not run here, or a list failed).
func (p *Plugin) enqueueAll(ctx context.Context, only func(reconcile.Request) bool) (n int, ok bool) {
	preds, err := predicate.FromManifest(p.Module().Manifest().For.Predicates)
	if err != nil {
		p.log.Error(err, "reading the For predicates to reconcile every object")
		return 0, false
	}
	if !p.Running() {
		return 0, false // a follower's controller has no queue; when it starts, it lists every object
	}
	// Held for the list alone and given back at once: the reads' are let go of when the
	// controller stops, which this may race with.
	var objs []runtime.Object
	for _, key := range p.keysFor(p.forGVK, false) {
		inf, err := p.infs.Acquire(informers.List, key)
		if err != nil {
			p.log.Error(err, "listing every object of the For kind to reconcile it")
			return 0, false
		}
		// A list the API server refuses fails at once: this may run under swapMu, which a
		// wait to the sync timeout would hold for minutes.
		err = inf.WaitForSyncUnlessRefused(ctx)
		if err == nil {
			some, _ := inf.List("", nil)
			objs = append(objs, some...)
		}
		p.infs.Release(informers.List, key)
		if err != nil {
			p.log.Error(err, "listing every object of the For kind to reconcile it")
			return 0, false
		}
		if inf.Key().Namespace == "" && key.Shard.All() {
			break // an informer of the whole cluster: listed once
		}
	}
	reqs := make([]reconcile.Request, 0, len(objs))
	for _, o := range objs {
		m := o.(metav1.Object)
		if len(p.cfg.Namespaces) > 0 && !slices.Contains(p.cfg.Namespaces, m.GetNamespace()) {
			continue
		}
		if !passes(preds, o.(event.Object)) {
			continue
		}
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}}
		if only != nil && !only(req) {
			continue
		}
		reqs = append(reqs, req)
	}
	p.ctrl.Enqueue(reqs...)
	return len(reqs), true
}

// passes tells whether obj passes every predicate, as an object that exists (a generic event).
func passes(preds []predicate.Predicate, obj event.Object) bool {
	for _, pr := range preds {
		if !pr.Generic(event.GenericEvent{Object: obj}) {
			return false
		}
	}
	return true
}

// RefusedBeforeError is a swap to a module refused before for what it is: it was not compiled
// again. Its source must change before it is tried again.
type RefusedBeforeError = versions.RefusedBeforeError

// ModuleRef is where the running module came from.
func (p *Plugin) ModuleRef() string { return p.source.Load().Ref }

// setSource makes src (if not nil) the plugin's source and wakes the triggers following it.
func (p *Plugin) setSource(src *modsource.Source) {
	if src == nil {
		return
	}
	p.movedMu.Lock()
	defer p.movedMu.Unlock()
	p.source.Store(src)
	if p.moved != nil {
		close(p.moved)
		p.moved = nil
	}
}

// FetchError is a module that could not be had: no file, no registry, no such tag. It refuses
// nothing: the source may be there later.
type FetchError struct {
	Module string
	Err    error
}

func (e *FetchError) Error() string { return e.Err.Error() } // it names the module already

func (e *FetchError) Unwrap() error { return e.Err }

// SwapTo swaps to the module at module (a file or an OCI reference); on success the plugin's
// triggers follow that source from then on. A module that cannot be fetched is a FetchError,
// and not told to OnSwap: only modules are refused.
//
// A module not signed as the plugin requires is refused (a *SignatureError) before it is
// compiled, and told to OnSwap.
func (p *Plugin) SwapTo(ctx context.Context, module string) error {
	wasmBytes, src, err := p.host.fetcher.Fetch(ctx, p.host.oci, module, p.cfg.bounds())
	if err != nil {
		return &FetchError{Module: module, Err: err} // the caller says it: it knows whether it is news
	}
	if err := p.host.verify(ctx, p.cfg.Name, p.checkers, wasmBytes, src); err != nil {
		if errors.As(err, new(*SignatureError)) {
			return p.swapRefused(p.Module().Digest(), err)
		}
		return err
	}
	return p.swap(ctx, wasmBytes, "", src)
}

// Triggers are the runnables that swap a plugin's module when its source changes: one follows
// its module file, the other its registry tag. Both follow the plugin's current source, file or
// registry, so add both whatever the module is now. They run on every replica.
func (p *Plugin) Triggers() []manager.Runnable {
	t := trigger{p}
	return []manager.Runnable{
		&modsource.FileWatcher{Plugin: p.cfg.Name, Target: t, Files: p.host.files, Fetch: &p.host.fetcher, Bounds: p.cfg.bounds(), Log: p.log},
		&modsource.TagPoller{Plugin: p.cfg.Name, Target: t, OCI: p.host.oci, Interval: p.cfg.pollInterval(), Bounds: p.cfg.bounds(), Log: p.log},
	}
}

// trigger is a plugin as its triggers see it.
type trigger struct{ p *Plugin }

func (t trigger) Source() (<-chan struct{}, *modsource.Source) {
	p := t.p
	p.movedMu.Lock()
	defer p.movedMu.Unlock()
	if p.moved == nil {
		p.moved = make(chan struct{})
	}
	return p.moved, p.source.Load()
}

// Serving is the digest the plugin is on: the running rollout's candidate, else the live one.
func (t trigger) Serving() string {
	if ro := t.p.ro.Load(); ro != nil {
		return ro.cand.mod.Digest()
	}
	return t.p.Module().Digest()
}

func (t trigger) SwapFrom(ctx context.Context, wasm []byte, from string) error {
	p := t.p
	err := p.swap(ctx, wasm, from, nil)
	if !overBudget(err) {
		return err
	}
	if digest := digestOf(wasm); p.cfg.Hooks.OnSwap != nil {
		if told, _ := p.overBudgetTold.Swap(digest).(string); told != digest {
			p.cfg.Hooks.OnSwap(SwapEvent{From: p.Module().Digest(), Err: err, NotNow: true})
		}
	}
	return fmt.Errorf("%w: %w", modsource.ErrNotNow, err)
}

func (t trigger) Verify(ctx context.Context, wasm []byte, src *modsource.Source) error {
	return t.p.host.verify(ctx, t.p.cfg.Name, t.p.checkers, wasm, src)
}

func (t trigger) Refuse(err error) { _ = t.p.swapRefused(t.p.Module().Digest(), err) }

func (t trigger) Tried(src *modsource.Source, manifestDigest string) {
	p := t.p
	p.movedMu.Lock() // source is written under movedMu alone (see setSource)
	defer p.movedMu.Unlock()
	p.source.CompareAndSwap(src, &modsource.Source{Ref: src.Ref, ManifestDigest: manifestDigest})
}

// WaitForModule waits until d has passed or, for a module file, until the file changes or
// appears (then a moment more, for the writer to finish); false if ctx ends first. It paces
// the retries of a plugin whose module could not be had.
func (h *Host) WaitForModule(ctx context.Context, module string, d time.Duration) bool {
	return modsource.WaitFor(ctx, h.files, module, d)
}
