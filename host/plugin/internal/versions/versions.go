// Package versions keeps the module versions a plugin has left behind: the ones swapped out
// lately, kept compiled so that a swap back is immediate, and the digests refused for what they
// are, so that a module refused once is not compiled again until its source changes. It is the
// bookkeeping half of the swap protocol; package plugin does the rest (checks, watches, publish).
package versions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/wasmrec/wasmrec/host/wasm"
)

// Defaults for Kept.
const (
	DefaultKeep    = 3  // versions kept compiled
	DefaultRefused = 16 // refused digests remembered
)

// Kept is a plugin's retired versions and refused digests. The zero value keeps the defaults.
// It is safe for concurrent use.
type Kept struct {
	// Max is how many retired versions stay compiled; RefusedMax how many refused digests are
	// remembered. Zero: the defaults.
	Max, RefusedMax int

	mu      sync.Mutex
	recent  map[string]*wasm.Module // retired versions, by digest
	order   []string                // their digests, oldest first
	refused map[string]error        // modules refused for what they are, by digest
	closed  bool
}

// RefusedBeforeError is a swap to a module refused before for what it is: it was not compiled
// again. Its source must change before it is tried again.
type RefusedBeforeError struct {
	Digest string
	Err    error // the first refusal
}

func (e *RefusedBeforeError) Error() string {
	return fmt.Sprintf("%v (refused before as module %s: not compiled again until it or the plugin's settings change)", e.Err, e.Digest)
}

func (e *RefusedBeforeError) Unwrap() error { return e.Err }

// Take hands over the retired version with digest, if one is kept (it is no longer kept: Keep it
// again if it does not get to serve). It returns a RefusedBeforeError for a digest refused before.
func (k *Kept) Take(digest string) (*wasm.Module, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.refused[digest]; err != nil {
		return nil, &RefusedBeforeError{Digest: digest, Err: err}
	}
	mod := k.recent[digest]
	if mod != nil {
		delete(k.recent, digest)
		k.order = slices.DeleteFunc(k.order, func(d string) bool { return d == digest })
	}
	return mod, nil
}

// Refuse remembers that the module with digest was refused for err, a reason that holds as long
// as the module does (its ABI, its manifest against the grant): not a passing one.
func (k *Kept) Refuse(digest string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refused == nil {
		k.refused = map[string]error{}
	}
	if len(k.refused) >= cmpOr(k.RefusedMax, DefaultRefused) {
		clear(k.refused) // rarely reached; forgetting only costs a compile
	}
	k.refused[digest] = err
}

// Keep keeps a retired module for a swap back, closing the oldest beyond Max; once the Kept is
// closed, it closes m instead.
func (k *Kept) Keep(m *wasm.Module) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		_ = m.Close(context.Background())
		return
	}
	if k.recent == nil {
		k.recent = map[string]*wasm.Module{}
	}
	d := m.Digest()
	k.recent[d] = m
	k.order = append(slices.DeleteFunc(k.order, func(o string) bool { return o == d }), d)
	var evicted []*wasm.Module
	for len(k.order) > cmpOr(k.Max, DefaultKeep) {
		oldest := k.order[0]
		k.order = k.order[1:]
		if mod := k.recent[oldest]; mod != nil {
			delete(k.recent, oldest)
			evicted = append(evicted, mod)
		}
	}
	k.mu.Unlock()
	for _, mod := range evicted {
		_ = mod.Close(context.Background())
	}
}

// Digests lists the versions kept, oldest first.
func (k *Kept) Digests() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.order)
}

// Close closes every version kept; modules kept after it are closed at once. It reports whether
// it was the first Close.
func (k *Kept) Close(ctx context.Context) (first bool, err error) {
	k.mu.Lock()
	first = !k.closed
	k.closed = true
	recent := k.recent
	k.recent, k.order = nil, nil
	k.mu.Unlock()
	var errs []error
	for _, m := range recent {
		errs = append(errs, m.Close(ctx))
	}
	return first, errors.Join(errs...)
}

// Closed reports whether Close has run.
func (k *Kept) Closed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
