package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// recorder keeps a plugin's recordings (Config.Record): it picks the reconciles its policy
// keeps and hands them to the plugin's store.
type recorder struct {
	policy recording.Policy
	store  *recording.Store
}

// recorderFor opens the store of cfg's recordings, if its settings ask for any.
func (h *Host) recorderFor(cfg Config) (*recorder, error) {
	pol := cfg.Record
	if pol == nil || !pol.On() {
		return nil, nil
	}
	// A refusal for the settings stands until they change (RefusedError): no retry mends them.
	if h.recordings == "" {
		return nil, &RefusedError{Err: fmt.Errorf("plugin %q: record.mode is %s, but this host keeps no recordings: run it with --recordings-dir, or set record.mode none", cfg.Name, pol.Mode)}
	}
	limit := pol.Bytes()
	switch {
	case limit == 0:
		limit = h.recordMax
	case limit > h.recordMax:
		return nil, &RefusedError{Err: fmt.Errorf("plugin %q: record.maxBytes %d is more than this host lets one plugin keep (%d, run --recordings-max-bytes): ask for less, or leave it out", cfg.Name, limit, h.recordMax)}
	}
	dir := filepath.Join(h.recordings, cfg.Name)
	log := h.log.WithValues("plugin", cfg.Name)
	store, err := recording.Open(dir, limit, log)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", cfg.Name, err)
	}
	log.Info("recording reconciles", "mode", pol.Mode, "dir", dir, "maxBytes", limit, "bytesKept", store.Bytes())
	return &recorder{policy: *pol, store: store}, nil
}

// keepModule keeps a module the plugin runs beside its recordings.
func (r *recorder) keepModule(mod *wasm.Module, wasmBytes []byte) {
	if r != nil {
		r.store.KeepModule(mod.Digest(), wasmBytes)
	}
}

func (r *recorder) close() {
	if r != nil {
		r.store.Close()
	}
}

type reconcileIDKey struct{}

// keep stores the reconcile c ran on mod, if the policy keeps it.
func (r *recorder) keep(ctx context.Context, name string, mod *wasm.Module, c *wasm.Call, started time.Time, failed bool) {
	if c.Step == nil || !r.policy.Keep(failed) {
		return
	}
	id, _ := ctx.Value(reconcileIDKey{}).(string)
	rec := &recording.Recording{
		Format: recording.Format, Plugin: name, Module: mod.Digest(), Settings: mod.Settings(), ReconcileID: id, Instance: c.Instance,
		Time: started.UTC(), Duration: time.Since(started).String(), Failed: failed, Step: c.Step,
	}
	r.store.Put(rec, c.Before)
}
