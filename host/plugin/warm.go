package plugin

import (
	"context"
	"sync"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
)

// warmer holds the informers a plugin's sources use on every replica, leader or not, so a
// follower's caches are synced when it takes over. It holds them in the plugin's informer set
// (informers.Warm), while it runs.
type warmer struct {
	p       *Plugin
	mu      sync.Mutex // guards running, and orders the warmer's changes to its holds
	running bool
}

func (w *warmer) Name() string { return w.p.cfg.Name + " (informers)" }

func (w *warmer) NeedLeaderElection() bool { return false }

func (w *warmer) Start(ctx context.Context) error {
	if err := w.p.checkWatches(); err != nil {
		return err
	}
	w.mu.Lock()
	w.running = true
	err := w.p.infs.Hold(informers.Warm, w.wanted())
	w.mu.Unlock()
	w.p.checkHealth() // they may be refused already, for another plugin
	if err == nil {
		<-ctx.Done()
	}
	w.mu.Lock()
	w.p.infs.ReleaseAll(informers.Warm)
	w.running = false
	w.mu.Unlock()
	return err
}

// wanted are the informers the warmer holds: those of the plugin's sources; on a replica that
// shares plugins, those of the plugin or shards it would take over first (warm standby).
func (w *warmer) wanted() []cache.Key {
	if w.p.host.share != nil {
		return w.p.standbyKeys()
	}
	return w.p.currentKeys()
}

// update holds exactly what the warmer wants now (see wanted), if it runs.
func (w *warmer) update() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running {
		return nil
	}
	return w.p.infs.Hold(informers.Warm, w.wanted())
}

// hold acquires the informers of keys too, keeping those it holds, if the warmer runs.
func (w *warmer) hold(keys []cache.Key) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running {
		return nil
	}
	return w.p.infs.Add(informers.Warm, keys)
}

// waitForSync waits until every informer held for uses has synced; one whose list the API
// server refuses the host fails it at once.
func (p *Plugin) waitForSync(ctx context.Context, uses ...informers.Use) error {
	for _, u := range uses {
		for _, inf := range p.infs.Informers(u) {
			if err := inf.WaitForSyncUnlessRefused(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
