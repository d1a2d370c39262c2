package plugin

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/wasmrec/wasmrec/host/cache"
)

// warmer holds the informers a plugin's sources use on every replica, leader or not, so a
// follower's caches are synced when it takes over.
type warmer struct {
	p    *Plugin
	mu   sync.Mutex
	held map[cache.Key]*cache.Informer // nil while not running
}

func (w *warmer) Name() string { return w.p.cfg.Name + " (informers)" }

func (w *warmer) NeedLeaderElection() bool { return false }

func (w *warmer) Start(ctx context.Context) error {
	if err := w.p.checkWatches(); err != nil {
		return err
	}
	w.mu.Lock()
	w.held = map[cache.Key]*cache.Informer{}
	err := w.holdLocked(w.wanted())
	w.mu.Unlock()
	w.p.checkHealth() // they may be refused already, for another plugin
	if err == nil {
		<-ctx.Done()
	}
	w.mu.Lock()
	for _, inf := range w.held {
		inf.Release()
	}
	w.held = nil
	w.mu.Unlock()
	return err
}

// keys are the keys of the informers the warmer holds (as the cache keys them).
func (w *warmer) keys() []cache.Key {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]cache.Key, 0, len(w.held))
	for _, inf := range w.held {
		keys = append(keys, inf.Key())
	}
	return keys
}

// wanted are the informers the warmer holds: those of the plugin's sources; on a replica that
// shares plugins, those of the plugin or shards it would take over first (warm standby).
func (w *warmer) wanted() []cache.Key {
	if w.p.host.share != nil {
		return w.p.standbyKeys()
	}
	return w.p.currentKeys()
}

// update holds exactly keys (on a replica that shares plugins, what it stands by for), if the
// warmer runs.
func (w *warmer) update(keys []cache.Key) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held == nil {
		return nil
	}
	if w.p.host.share != nil {
		keys = w.wanted()
	}
	return w.holdLocked(keys)
}

// hold acquires the informers of keys too, keeping those it holds, if the warmer runs.
func (w *warmer) hold(keys []cache.Key) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held == nil {
		return nil
	}
	return w.holdLocked(append(slices.Collect(maps.Keys(w.held)), keys...))
}

// waitForSync waits until every informer held has synced; one whose list the API server
// refuses the host fails it at once.
func (w *warmer) waitForSync(ctx context.Context) error {
	w.mu.Lock()
	infs := slices.Collect(maps.Values(w.held))
	w.mu.Unlock()
	for _, inf := range infs {
		if err := inf.WaitForSyncUnlessRefused(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (w *warmer) holdLocked(keys []cache.Key) error {
	for _, k := range keys {
		if _, ok := w.held[k]; ok {
			continue
		}
		inf, err := w.p.host.mgr.GetCache().Acquire(k)
		if err != nil {
			return err
		}
		w.held[k] = inf
	}
	for k, inf := range w.held {
		if !slices.Contains(keys, k) {
			inf.Release()
			delete(w.held, k)
		}
	}
	return nil
}
