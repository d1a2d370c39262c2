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
	// Max is how many retired versions stay compiled. Zero: DefaultKeep.
	Max int

	refused Refused // modules refused for what they are

	mu     sync.Mutex
	recent map[string]*wasm.Module // retired versions, by digest
	order  []string                // their digests, oldest first
	closed bool
}

// Refused remembers the modules a plugin refused for what they are (their ABI, their manifest
// against the grant), by digest, so that one refused is not compiled again: the one place that
// keeps them, for loads and swaps alike. The zero value remembers DefaultRefused digests. It is
// safe for concurrent use.
type Refused struct {
	// Max is how many digests are remembered. Zero: DefaultRefused.
	Max int

	mu      sync.Mutex
	refused map[string]error
}

// Check returns a RefusedBeforeError if digest was refused.
func (r *Refused) Check(digest string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refused[digest]; err != nil {
		return &RefusedBeforeError{Digest: digest, Err: err}
	}
	return nil
}

// Refuse remembers that the module with digest was refused for err, a reason that holds as long
// as the module does: not a passing one.
func (r *Refused) Refuse(digest string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused == nil {
		r.refused = map[string]error{}
	}
	if len(r.refused) >= cmpOr(r.Max, DefaultRefused) {
		clear(r.refused) // rarely reached; forgetting only costs a compile
	}
	r.refused[digest] = err
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
	if err := k.refused.Check(digest); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	mod := k.recent[digest]
	if mod != nil {
		delete(k.recent, digest)
		k.order = slices.DeleteFunc(k.order, func(d string) bool { return d == digest })
	}
	return mod, nil
}

// Refuse remembers that the module with digest was refused for err, a reason that holds as long
// as the module does (its ABI, its manifest against the grant): not a passing one.
func (k *Kept) Refuse(digest string, err error) { k.refused.Refuse(digest, err) }

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
