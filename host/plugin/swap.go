package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/internal/filewatch"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
	"github.com/wasmrec/wasmrec/host/wasm"
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
func (p *Plugin) Swap(ctx context.Context, wasmBytes []byte) error {
	return p.swap(ctx, wasmBytes, "", nil)
}

// swapSyncTimeout bounds how long a swap waits for its new watches' informers to sync.
const swapSyncTimeout = 30 * time.Second

// swap is Swap for the triggers. A non-empty onlyFrom skips the swap unless the plugin's source
// is still onlyFrom (a trigger acting on a source the plugin has left must not move it back); a
// non-nil to becomes the plugin's source once its module serves.
//
// Compiling happens before the swap lock is taken, and retiring after it is let go: the lock
// is held only to check, start the new watches and publish, never while waiting on a guest.
func (p *Plugin) swap(ctx context.Context, wasmBytes []byte, onlyFrom string, to *moduleSource) error {
	sum := sha256.Sum256(wasmBytes)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if digest == p.Module().Digest() {
		p.swapMu.Lock()
		defer p.swapMu.Unlock()
		if onlyFrom == "" || p.ModuleRef() == onlyFrom {
			p.setSource(to)
		}
		return nil
	}
	p.recentMu.Lock()
	refused := p.refusedDigests[digest]
	mod := p.recent[digest] // a version swapped out lately: checked already, still compiled
	if mod != nil {
		delete(p.recent, digest)
		p.recentOrder = slices.DeleteFunc(p.recentOrder, func(d string) bool { return d == digest })
	}
	p.recentMu.Unlock()
	if refused != nil {
		return &RefusedBeforeError{Digest: digest, Err: refused}
	}
	start := time.Now()
	reused := mod != nil
	if !reused {
		var err error
		if p.host.metrics != nil {
			p.host.metrics.Compiles.WithLabelValues(p.cfg.Name).Inc()
		}
		if mod, err = p.host.engine.Compile(ctx, wasmBytes, p.moduleOptions()); err != nil {
			if ctx.Err() == nil {
				p.rememberRefused(digest, err)
			}
			return p.swapRefused(p.Module().Digest(), err) // it names the plugin
		}
	}
	// giveBack undoes the take above for a module that does not get to serve.
	giveBack := func() {
		if reused {
			p.keepRecent(mod)
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
		p.setSource(to)
		return nil
	}
	next, srcs, err := p.checkSwap(ctx, old, mod)
	if err != nil {
		giveBack()
		p.rememberRefused(digest, err)
		return p.swapRefused(old.mod.Digest(), fmt.Errorf("plugin %q: %s: %w", p.cfg.Name, mod.Digest(), err))
	}
	if srcs != nil {
		if err := p.startWatches(ctx, srcs); err != nil {
			giveBack() // not remembered: the API server may serve them later
			return p.swapRefused(old.mod.Digest(), fmt.Errorf("plugin %q: %s: %w", p.cfg.Name, mod.Digest(), err))
		}
	}
	if reused {
		mod.Reactivate()
	}
	p.current.Store(next)
	p.setSource(to)
	if srcs != nil {
		p.finishWatches(srcs)
	}
	if p.OnSwap != nil {
		p.OnSwap(SwapEvent{From: old.mod.Digest(), To: mod.Digest(), Rollback: reused})
	}
	p.log.Info("swapped the module", "from", old.mod.Digest(), "to", mod.Digest(), "rollback", reused, "took", time.Since(start).Round(time.Millisecond))
	if p.host.metrics != nil {
		p.host.metrics.Swaps.WithLabelValues(p.cfg.Name, "swapped").Inc()
	}
	p.enqueueAll(ctx)
	// In-flight reconciles hold the old module: it is retired once they are back, and kept
	// compiled so that a swap back to it is immediate. Nothing waits for that.
	go func() {
		_ = old.mod.Retire(context.Background())
		p.keepRecent(old.mod)
	}()
	return nil
}

// RefusedBeforeError is a swap to a module refused before for what it is: it was not compiled
// again. Its source must change before it is tried again.
type RefusedBeforeError struct {
	Digest string
	Err    error // the first refusal
}

func (e *RefusedBeforeError) Error() string {
	return fmt.Sprintf("module %s was refused before and is not tried again until it changes: %v", e.Digest, e.Err)
}

func (e *RefusedBeforeError) Unwrap() error { return e.Err }

// keptRefusals is how many refused digests a plugin remembers.
const keptRefusals = 16

// rememberRefused remembers that the module with digest was refused for err.
func (p *Plugin) rememberRefused(digest string, err error) {
	p.recentMu.Lock()
	defer p.recentMu.Unlock()
	if p.refusedDigests == nil {
		p.refusedDigests = map[string]error{}
	}
	if len(p.refusedDigests) >= keptRefusals {
		clear(p.refusedDigests) // rarely reached; forgetting only costs a compile
	}
	p.refusedDigests[digest] = err
}

// SwapEvent is one swap attempt.
type SwapEvent struct {
	From, To string // module digests; To is empty for a refused swap
	// Rollback is true for a swap to a version that served before and was kept compiled.
	Rollback bool
	Err      error // what refused the swap; nil for one that happened
}

// keptVersions is how many swapped-out versions a plugin keeps compiled.
const keptVersions = 3

// keepRecent keeps a retired module for a swap back, closing the oldest beyond keptVersions
// (and m itself once the plugin is closed).
func (p *Plugin) keepRecent(m *wasm.Module) {
	p.recentMu.Lock()
	if p.closed {
		p.recentMu.Unlock()
		_ = m.Close(context.Background())
		return
	}
	if p.recent == nil {
		p.recent = map[string]*wasm.Module{}
	}
	p.recent[m.Digest()] = m
	p.recentOrder = append(slices.DeleteFunc(p.recentOrder, func(d string) bool { return d == m.Digest() }), m.Digest())
	var evicted []*wasm.Module
	for len(p.recentOrder) > keptVersions {
		oldest := p.recentOrder[0]
		p.recentOrder = p.recentOrder[1:]
		if mod := p.recent[oldest]; mod != nil {
			delete(p.recent, oldest)
			evicted = append(evicted, mod)
		}
	}
	p.recentMu.Unlock()
	for _, mod := range evicted {
		_ = mod.Close(context.Background())
	}
}

func (p *Plugin) swapRefused(from string, err error) error {
	if p.OnSwap != nil {
		p.OnSwap(SwapEvent{From: from, Err: err})
	}
	return p.refused(err)
}

func (p *Plugin) refused(err error) error {
	p.log.Error(err, "module swap refused; the current module keeps serving", "serving", p.Module().Digest())
	if p.host.metrics != nil {
		p.host.metrics.Swaps.WithLabelValues(p.cfg.Name, "refused").Inc()
	}
	return err
}

func (p *Plugin) moduleOptions() wasm.Options {
	return wasm.Options{
		Name:          p.cfg.Name,
		MaxInstances:  max(p.cfg.MaxConcurrentReconciles, 1),
		MemoryLimit:   quantity(p.cfg.MemoryLimit),
		RecycleAbove:  quantity(p.cfg.RecycleAbove),
		Interruptible: p.cfg.Interruptible,
		Logger:        p.log,
		LogLimit:      p.cfg.LogLimit,
	}
}

// checkSwap checks mod as the successor of old under the one permission policy: it asks for no
// more than the grant, reconciles the same kind, and may list and watch every kind it watches,
// all served. If the watches change it returns the new sources.
func (p *Plugin) checkSwap(ctx context.Context, old *version, mod *wasm.Module) (*version, map[string]watched, error) {
	next, err := p.versionOf(mod)
	if err != nil {
		return nil, nil, err
	}
	if err := p.checkReads(ctx, next.policy); err != nil {
		return nil, nil, err
	}
	om, nm := old.mod.Manifest(), mod.Manifest()
	unresolved, err := next.policy.CheckWatches(nm, p.host.mgr.GetCache().RESTMapper())
	if err != nil {
		return nil, nil, err
	}
	watches := func(m *abi.Manifest) string {
		b, _ := json.Marshal([]any{m.For, m.Owns, m.Watches})
		return string(b)
	}
	if watches(om) == watches(nm) {
		return next, nil, nil
	}
	if nm.For.APIVersion != om.For.APIVersion || nm.For.Kind != om.For.Kind {
		return nil, nil, fmt.Errorf("the new module reconciles %s %s, the running one %s %s: a plugin keeps its For kind; run it as another plugin",
			nm.For.APIVersion, nm.For.Kind, om.For.APIVersion, om.For.Kind)
	}
	if len(unresolved) > 0 {
		return nil, nil, fmt.Errorf("the new module watches %v, which the API server does not serve: install their CRDs first", unresolved)
	}
	srcs, err := p.sourcesFor(nm)
	if err != nil {
		return nil, nil, err
	}
	return next, srcs, nil
}

// startWatches is a swap's first half of moving to new sources: the informers of every new
// source are held and synced, and the new sources are added to the controller. If any of that
// fails, what was added is taken back and the error says what failed.
func (p *Plugin) startWatches(ctx context.Context, next map[string]watched) (err error) {
	var added []source.Source
	defer func() {
		if err == nil {
			return
		}
		for _, src := range added {
			_ = p.ctrl.Unwatch(src)
		}
		_ = p.warm.update(p.currentKeys())
	}()
	keys := keysOf(next)
	if err := p.warm.hold(keys); err != nil {
		return fmt.Errorf("starting the informers of the new watches: %w", err)
	}
	syncCtx, cancel := context.WithTimeout(ctx, swapSyncTimeout)
	defer cancel()
	if err := p.warm.waitForSync(syncCtx); err != nil {
		return fmt.Errorf("the informers of the new watches did not sync: %w", err)
	}
	for id, w := range next {
		if _, ok := p.srcs[id]; ok {
			continue
		}
		if err := p.ctrl.Watch(w.src); err != nil {
			return fmt.Errorf("adding the new watch %s: %w", w.src, err)
		}
		added = append(added, w.src)
	}
	return nil
}

// finishWatches is a swap's second half, once the new module serves: sources the new module
// does not have stop, the informers only they used are released, and the plugin's kinds follow.
func (p *Plugin) finishWatches(next map[string]watched) {
	for id := range next {
		if cur, ok := p.srcs[id]; ok {
			next[id] = cur // unchanged: keep the running source
		}
	}
	for id, w := range p.srcs {
		if _, ok := next[id]; !ok {
			if err := p.ctrl.Unwatch(w.src); err != nil {
				p.log.Error(err, "removing a watch after a swap")
			}
		}
	}
	p.srcs = next
	keys := keysOf(next)
	p.watchMu.Lock()
	p.keys = keys
	p.watchMu.Unlock()
	if err := p.warm.update(keys); err != nil {
		p.log.Error(err, "releasing the informers of the old watches")
	}
	kinds := p.Kinds()
	for _, f := range p.follows {
		f.SetKinds(kinds)
	}
	p.log.Info("applied the new module's watches", "kinds", kinds)
}

// enqueueAll enqueues every object of the For kind the plugin sees: in its namespaces, and
// let through by the running module's For predicates.
func (p *Plugin) enqueueAll(ctx context.Context) {
	preds, err := predicates(p.Module().Manifest().For.Predicates)
	if err != nil {
		p.log.Error(err, "reading the For predicates to reconcile after a swap")
		return
	}
	if !p.Running() {
		return // a follower's controller has no queue; when it starts, it lists every object
	}
	// A reference of its own, given back at once: the reader's are released when the controller
	// stops, which this may race with.
	inf, err := p.host.mgr.GetCache().Acquire(cache.Key{GroupVersionKind: p.forGVK})
	if err != nil {
		p.log.Error(err, "listing objects to reconcile after a swap")
		return
	}
	defer inf.Release()
	if err := inf.WaitForSync(ctx); err != nil {
		p.log.Error(err, "listing objects to reconcile after a swap")
		return
	}
	objs, err := inf.List("", nil)
	if err != nil {
		return
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
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
	}
	p.ctrl.Enqueue(reqs...)
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

// moduleSource is where a plugin's running module came from: a file path or an OCI
// reference, and for the latter the manifest digest it resolved to.
type moduleSource struct {
	ref            string
	manifestDigest string
	fetched        time.Time // when its module was read (zero: unknown)
}

// ModuleRef is where the running module came from.
func (p *Plugin) ModuleRef() string { return p.source.Load().ref }

// setSource makes src (if not nil) the plugin's source and wakes the triggers following it.
func (p *Plugin) setSource(src *moduleSource) {
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

// currentSource returns the plugin's source and a channel closed when it next changes.
func (p *Plugin) currentSource() (<-chan struct{}, *moduleSource) {
	p.movedMu.Lock()
	defer p.movedMu.Unlock()
	if p.moved == nil {
		p.moved = make(chan struct{})
	}
	return p.moved, p.source.Load()
}

// SwapTo swaps to the module at module (a file or an OCI reference); on success the plugin's
// triggers follow that source from then on.
func (p *Plugin) SwapTo(ctx context.Context, module string) error {
	fetched := time.Now()
	wasmBytes, manifest, err := p.host.fetch(ctx, module)
	if err != nil {
		return p.swapRefused(p.Module().Digest(), err)
	}
	return p.swap(ctx, wasmBytes, "", &moduleSource{ref: module, manifestDigest: manifest, fetched: fetched})
}

// Triggers are the runnables that swap a plugin's module when its source changes: a
// FileWatcher and a TagPoller. Both follow the plugin's current source, file or registry, so
// add both whatever the module is now.
func (p *Plugin) Triggers() []manager.Runnable {
	return []manager.Runnable{&FileWatcher{Plugin: p}, &TagPoller{Plugin: p}}
}

// FileWatcher swaps a plugin's module when its file changes. It follows the plugin's current
// source: after a swap to another file it watches that one, and it idles while the module comes
// from a registry. It is a manager Runnable that runs on every replica, so a follower also has
// the new module when it takes over.
type FileWatcher struct {
	Plugin *Plugin
}

// NeedLeaderElection is false: every replica follows the file.
func (w *FileWatcher) NeedLeaderElection() bool { return false }

// Name names the watcher in logs.
func (w *FileWatcher) Name() string { return w.Plugin.cfg.Name + " (module file)" }

// Start follows the module file until ctx is done, through the host's one file watcher: a
// write in place, a file replaced by rename, and a ConfigMap or Secret volume's `..data` swap
// all wake it, and it swaps once the changes settle (a swap to the digest running does
// nothing). A file that cannot be watched is logged, not fatal: the plugin keeps serving, and
// a later move to another file is followed.
func (w *FileWatcher) Start(ctx context.Context) error {
	p := w.Plugin
	var (
		path   string           // the file followed ("" for none)
		sub    *filewatch.Sub   // its subscription (nil for none)
		settle <-chan time.Time // changes come in bursts: act once they stop
	)
	changed := func() <-chan struct{} {
		if sub == nil {
			return nil
		}
		return sub.C
	}
	follow := func() <-chan struct{} {
		moved, src := p.currentSource()
		next := src.ref
		if _, fromRegistry := ociRef(next); fromRegistry {
			next = ""
		}
		if next == path {
			return moved
		}
		if sub != nil {
			sub.Stop()
			sub = nil
		}
		path, settle = next, nil
		if next != "" {
			var err error
			if sub, err = p.host.files.Watch(next); err != nil {
				p.log.Error(err, "cannot watch the module file: changes to it are not swapped in", "path", next)
			} else if changedSince(next, src.fetched) {
				// It changed between the module's read and now: read it again.
				settle = time.After(100 * time.Millisecond)
			}
		}
		return moved
	}
	moved := follow()
	defer func() {
		if sub != nil {
			sub.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-moved:
			moved = follow()
		case <-changed():
			settle = time.After(100 * time.Millisecond)
		case <-settle:
			settle = nil
			b, _, err := p.host.fetch(ctx, path)
			if err != nil {
				p.log.Error(err, "reading the changed module file; the current module keeps serving", "path", path)
				continue
			}
			var before *RefusedBeforeError
			if err := p.swap(ctx, b, path, nil); errors.As(err, &before) { // swap logs and counts the rest
				p.log.Info("the module file holds a module refused before; the current module keeps serving", "path", path, "refused", before.Digest, "serving", p.Module().Digest())
			}
		}
	}
}

// WaitForModule waits until d has passed or, for a module file, until the file changes or
// appears (then a moment more, for the writer to finish); false if ctx ends first. It paces
// the retries of a plugin whose module could not be had.
func (h *Host) WaitForModule(ctx context.Context, module string, d time.Duration) bool {
	var changed <-chan struct{}
	if _, fromRegistry := ociRef(module); !fromRegistry {
		if sub, err := h.files.Watch(module); err == nil { // a folder that is not there: the timer alone
			defer sub.Stop()
			changed = sub.C
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-changed:
	}
	t.Reset(100 * time.Millisecond)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// changedSince tells whether the file at path (through its symlinks) may have changed since t:
// its modification or change time (a rename sets the latter) is not clearly before t. A file
// that cannot be read counts as changed.
func changedSince(path string, t time.Time) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return true
	}
	return !lastChange(fi).Before(t.Add(-time.Second)) // file times can be coarse
}

// lastChange is the later of a file's modification and change times.
func lastChange(fi os.FileInfo) time.Time {
	changed := fi.ModTime()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if c := time.Unix(st.Ctim.Unix()); c.After(changed) {
			changed = c
		}
	}
	return changed
}

// TagPoller swaps a plugin's module when the registry tag its module came from moves to a new
// digest. It follows the plugin's current source: after a swap to another reference it polls
// that one, and it idles while the module is a file or pinned by digest. A registry that
// cannot be reached leaves the running module serving, is logged now and then, and the next
// poll tries again; a module refused is counted once and not tried again until the tag moves.
// It runs on every replica.
type TagPoller struct {
	Plugin *Plugin

	unreachable rate.Sometimes // says a failing registry now and then
}

// NeedLeaderElection is false: every replica follows the tag.
func (t *TagPoller) NeedLeaderElection() bool { return false }

// Name names the poller in logs.
func (t *TagPoller) Name() string { return t.Plugin.cfg.Name + " (tag poller)" }

// Start polls until ctx is done.
func (t *TagPoller) Start(ctx context.Context) error {
	p := t.Plugin
	t.unreachable = rate.Sometimes{Interval: 5 * time.Minute}
	tick := time.NewTicker(p.cfg.pollInterval())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		src := p.source.Load()
		ref, ok := ociRef(src.ref)
		if !ok || strings.Contains(ref, "@") || p.host.OCI == nil {
			continue // a file, or pinned by digest: nothing moves
		}
		// A registry that cannot be reached refuses nothing: it is said (at most every few
		// minutes) and the next poll tries again.
		digest, err := p.host.OCI.Resolve(ctx, ref)
		if err != nil {
			t.unreachable.Do(func() {
				p.log.Error(err, "polling the module's tag; the current module keeps serving", "ref", ref, "pollInterval", p.cfg.pollInterval())
			})
			continue
		}
		if digest == src.manifestDigest {
			continue
		}
		m, err := p.host.OCI.Pull(ctx, ref)
		if err != nil {
			t.unreachable.Do(func() { p.log.Error(err, "pulling the module's new tag; the current module keeps serving", "ref", ref) })
			continue
		}
		p.log.Info("tag moved: swapping", "ref", ref, "manifest", m.ManifestDigest, "module", m.Digest)
		_ = p.swap(ctx, m.Wasm, src.ref, nil) // logs and counts a refusal
		// Refused or not, this manifest has been tried: wait for the tag to move again. If the
		// plugin moved to another source meanwhile, that one stays.
		p.source.CompareAndSwap(src, &moduleSource{ref: src.ref, manifestDigest: m.ManifestDigest})
	}
}
