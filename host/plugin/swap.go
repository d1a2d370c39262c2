package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/internal/filewatch"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// Swap replaces the plugin's module with wasmBytes without stopping it: the new module is
// compiled, checked against ABI v1, smoke-instantiated and its manifest checked against the
// grant; then new reconciles use it while in-flight ones finish on the old one, which is then
// closed, and every object of the For kind is enqueued so the new logic converges the world.
// The queue and the informers stay. If any step fails the current module keeps serving and the
// error says why. A swap to the digest already running does nothing.
func (p *Plugin) Swap(ctx context.Context, wasmBytes []byte) error {
	return p.swap(ctx, wasmBytes, "", nil)
}

// swap is Swap for the triggers. A non-empty onlyFrom skips the swap unless the plugin's source
// is still onlyFrom (a trigger acting on a source the plugin has left must not move it back); a
// non-nil to becomes the plugin's source once its module serves.
func (p *Plugin) swap(ctx context.Context, wasmBytes []byte, onlyFrom string, to *moduleSource) error {
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	if onlyFrom != "" && p.ModuleRef() != onlyFrom {
		return nil
	}
	old := p.Module()
	sum := sha256.Sum256(wasmBytes)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if digest == old.Digest() {
		p.setSource(to)
		return nil
	}
	start := time.Now()
	mod := p.recent[digest] // a version swapped out lately: checked already, still compiled
	reused := mod != nil
	if !reused {
		var err error
		if mod, err = p.host.engine.Compile(ctx, wasmBytes, p.moduleOptions()); err != nil {
			return p.swapRefused(old.Digest(), err)
		}
	}
	srcs, err := p.checkSwap(old.Manifest(), mod.Manifest())
	if err != nil {
		if !reused {
			_ = mod.Close(ctx)
		}
		return p.swapRefused(old.Digest(), fmt.Errorf("plugin %q: %s: %w", p.cfg.Name, mod.Digest(), err))
	}
	if reused {
		delete(p.recent, digest)
		mod.Reactivate()
	}
	p.module.Store(mod)
	p.setSource(to)
	if srcs != nil {
		p.applyWatches(srcs)
	}
	if p.OnSwap != nil {
		p.OnSwap(SwapEvent{From: old.Digest(), To: mod.Digest(), Rollback: reused})
	}
	p.log.Info("swapped the module", "from", old.Digest(), "to", mod.Digest(), "rollback", reused, "took", time.Since(start).Round(time.Millisecond))
	if p.host.metrics != nil {
		p.host.metrics.Swaps.WithLabelValues(p.cfg.Name, "swapped").Inc()
	}
	p.enqueueAll(ctx)
	// In-flight reconciles hold the old module; Retire waits for them (bounded by the timeout)
	// and keeps it compiled, so a swap back to it is immediate.
	retireCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.timeout()+5*time.Second)
	defer cancel()
	if err := old.Retire(retireCtx); err != nil {
		p.log.Error(err, "retiring the swapped-out module", "digest", old.Digest())
	}
	p.keepRecent(ctx, old)
	return nil
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

// keepRecent keeps a retired module for a swap back, closing the oldest beyond keptVersions.
func (p *Plugin) keepRecent(ctx context.Context, m *wasm.Module) {
	if p.recent == nil {
		p.recent = map[string]*wasm.Module{}
	}
	p.recent[m.Digest()] = m
	p.recentOrder = append(slices.DeleteFunc(p.recentOrder, func(d string) bool { return d == m.Digest() }), m.Digest())
	for len(p.recentOrder) > keptVersions {
		oldest := p.recentOrder[0]
		p.recentOrder = p.recentOrder[1:]
		if mod := p.recent[oldest]; mod != nil {
			delete(p.recent, oldest)
			_ = mod.Close(context.WithoutCancel(ctx))
		}
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

// checkSwap refuses a module asking for more than the grant, reconciling another kind, or
// watching a kind that is not served. If the watches change it returns the new sources.
func (p *Plugin) checkSwap(old, next *abi.Manifest) (map[string]watched, error) {
	if missing := abi.Missing(p.cfg.Permissions, next.Permissions); len(missing) > 0 {
		return nil, fmt.Errorf("the new module asks for permissions it was not granted: %s: grant them, or use a module that needs less", joinRules(missing))
	}
	watches := func(m *abi.Manifest) string {
		b, _ := json.Marshal([]any{m.For, m.Owns, m.Watches})
		return string(b)
	}
	if watches(old) == watches(next) {
		return nil, nil
	}
	if next.For.APIVersion != old.For.APIVersion || next.For.Kind != old.For.Kind {
		return nil, fmt.Errorf("the new module reconciles %s %s, the running one %s %s: a plugin keeps its For kind; run it as another plugin",
			next.For.APIVersion, next.For.Kind, old.For.APIVersion, old.For.Kind)
	}
	srcs, err := p.sourcesFor(next)
	if err != nil {
		return nil, err
	}
	for _, k := range keysOf(srcs) {
		if !p.host.crds.Served(k.GroupVersionKind) {
			return nil, fmt.Errorf("the new module watches %s, which the API server does not serve: install its CRD first", k.GroupVersionKind)
		}
	}
	return srcs, nil
}

// applyWatches moves the controller to the new sources: new ones start before the ones they
// replace stop, so a kind watched by both keeps its informer.
func (p *Plugin) applyWatches(next map[string]watched) {
	for id, w := range next {
		if cur, ok := p.srcs[id]; ok {
			next[id] = cur // unchanged: keep the running source
			continue
		}
		if err := p.ctrl.Watch(w.src); err != nil {
			p.log.Error(err, "adding a watch after a swap")
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
		p.log.Error(err, "holding the informers of the new watches")
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
	inf, err := p.reader.informer(ctx, p.forGVK)
	if err != nil {
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
			_ = p.swap(ctx, b, path, nil) // logs and counts its outcome
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
// that one, and it idles while the module is a file or pinned by digest. A failure (registry
// unreachable, a module refused) leaves the running module serving, is logged and counted, and
// the next poll tries again. It runs on every replica.
type TagPoller struct {
	Plugin *Plugin
}

// NeedLeaderElection is false: every replica follows the tag.
func (t *TagPoller) NeedLeaderElection() bool { return false }

// Name names the poller in logs.
func (t *TagPoller) Name() string { return t.Plugin.cfg.Name + " (tag poller)" }

// Start polls until ctx is done.
func (t *TagPoller) Start(ctx context.Context) error {
	p := t.Plugin
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
		digest, err := p.host.OCI.Resolve(ctx, ref)
		if err != nil {
			_ = p.swapRefused(p.Module().Digest(), fmt.Errorf("polling %s: %w", ref, err))
			continue
		}
		if digest == src.manifestDigest {
			continue
		}
		m, err := p.host.OCI.Pull(ctx, ref)
		if err != nil {
			_ = p.swapRefused(p.Module().Digest(), err)
			continue
		}
		p.log.Info("tag moved: swapping", "ref", ref, "manifest", m.ManifestDigest, "module", m.Digest)
		_ = p.swap(ctx, m.Wasm, src.ref, nil) // logs and counts a refusal
		// Refused or not, this manifest has been tried: wait for the tag to move again. If the
		// plugin moved to another source meanwhile, that one stays.
		p.source.CompareAndSwap(src, &moduleSource{ref: src.ref, manifestDigest: m.ManifestDigest})
	}
}
