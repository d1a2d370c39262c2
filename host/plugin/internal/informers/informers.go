package informers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/wasmrec/wasmrec/host/cache"
)

// Use is what a plugin holds an informer for. Each use holds its informers apart from the
// others: one use letting go of an informer leaves it held for the rest.
type Use uint8

const (
	// Watch: the controller's sources, each from its start to its stop.
	Watch Use = iota
	// Warm: held on every replica, leader or not, so that a takeover finds them synced.
	Warm
	// Read: the guest's reads, from the first read of a key until the controller stops.
	Read
	// List: a list of the plugin's own (a swap's, of every object to reconcile), given back
	// when done.
	List
	uses
)

func (u Use) String() string {
	switch u {
	case Watch:
		return "watch"
	case Warm:
		return "warm"
	case Read:
		return "read"
	case List:
		return "list"
	}
	return fmt.Sprintf("use(%d)", u)
}

// Cache is where a Set gets informers from: a *cache.Cache.
type Cache interface {
	Acquire(cache.Key) (*cache.Informer, error)
}

// ErrClosed is returned by an acquire after Close.
var ErrClosed = errors.New("the plugin's informers are let go of: the plugin is closed")

// Set is one plugin's informers. It acquires the cache's informer of a key once, whatever
// holds it in the plugin, counts the holds of each use, and releases the informer when the
// last is let go of. Its lock guards its counts alone: the cache's Acquire (which may ask the
// API server's discovery) and Release (which waits for the informer to stop) are called
// outside it, so that a guest's read never waits on another key's informer stopping.
type Set struct {
	cache Cache
	// onNew is called, outside the lock, when a use holds a key it did not hold before.
	onNew func(Use, cache.Key)

	mu     sync.Mutex
	held   map[cache.Key]*held // by the key asked for
	closed bool
}

type held struct {
	inf   *cache.Informer
	count [uses]int // holds of each use
}

func (h *held) total() int {
	n := 0
	for _, c := range h.count {
		n += c
	}
	return n
}

// New returns an empty Set of c's informers. onNew, if not nil, is called (outside the Set's
// lock) each time a use comes to hold a key it did not hold.
func New(c Cache, onNew func(Use, cache.Key)) *Set {
	return &Set{cache: c, onNew: onNew, held: map[cache.Key]*held{}}
}

// Acquire holds key once more for u and returns its informer. Pair it with one Release of u
// and key. The informer is the Set's: never Release it yourself.
func (s *Set) Acquire(u Use, key cache.Key) (*cache.Informer, error) {
	return s.hold(u, key, true)
}

// Ensure holds key for u if u does not hold it yet, and returns its informer.
func (s *Set) Ensure(u Use, key cache.Key) (*cache.Informer, error) {
	return s.hold(u, key, false)
}

func (s *Set) hold(u Use, key cache.Key, again bool) (*cache.Informer, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	h, ok := s.held[key]
	var spare *cache.Informer // acquired below, but another hold got there first
	if !ok {
		s.mu.Unlock()
		inf, err := s.cache.Acquire(key)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		switch h, ok = s.held[key]; {
		case s.closed:
			s.mu.Unlock()
			inf.Release()
			return nil, ErrClosed
		case ok:
			spare = inf
		default:
			h = &held{inf: inf}
			s.held[key] = h
		}
	}
	first := h.count[u] == 0
	if first || again {
		h.count[u]++
	}
	s.mu.Unlock()
	if spare != nil {
		spare.Release()
	}
	if first && s.onNew != nil {
		s.onNew(u, key)
	}
	return h.inf, nil
}

// Release lets go of one hold of key by u; the informer goes back to the cache when nothing
// holds it. Releasing what u does not hold does nothing.
func (s *Set) Release(u Use, key cache.Key) {
	s.mu.Lock()
	var unused []*cache.Informer
	if h, ok := s.held[key]; ok && h.count[u] > 0 {
		h.count[u]--
		unused = s.dropIfUnusedLocked(unused, key, h)
	}
	s.mu.Unlock()
	release(unused)
}

// dropIfUnusedLocked forgets key if nothing holds it, and appends its informer to unused, to be
// released once the lock is let go of.
func (s *Set) dropIfUnusedLocked(unused []*cache.Informer, key cache.Key, h *held) []*cache.Informer {
	if h.total() > 0 {
		return unused
	}
	delete(s.held, key)
	return append(unused, h.inf)
}

func release(infs []*cache.Informer) {
	for _, inf := range infs {
		inf.Release()
	}
}

// Hold makes u hold exactly keys, once each: it acquires those u does not hold and lets go of
// the others. On an error it has acquired some of keys and let go of nothing.
func (s *Set) Hold(u Use, keys []cache.Key) error {
	if err := s.Add(u, keys); err != nil {
		return err
	}
	s.mu.Lock()
	var unused []*cache.Informer
	for key, h := range s.held {
		if h.count[u] > 0 && !slices.Contains(keys, key) {
			h.count[u] = 0
			unused = s.dropIfUnusedLocked(unused, key, h)
		}
	}
	s.mu.Unlock()
	release(unused)
	return nil
}

// Add holds each of keys for u, if u does not hold it yet.
func (s *Set) Add(u Use, keys []cache.Key) error {
	for _, key := range keys {
		if _, err := s.Ensure(u, key); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseAll lets go of every hold of u.
func (s *Set) ReleaseAll(u Use) {
	s.mu.Lock()
	var unused []*cache.Informer
	for key, h := range s.held {
		if h.count[u] > 0 {
			h.count[u] = 0
			unused = s.dropIfUnusedLocked(unused, key, h)
		}
	}
	s.mu.Unlock()
	release(unused)
}

// Close lets go of every informer, whatever holds it, and refuses every acquire from then on:
// what still runs on a closed plugin (a shadow reconcile coming back late) cannot take an
// informer that nothing would let go of.
func (s *Set) Close() {
	s.mu.Lock()
	s.closed = true
	var unused []*cache.Informer
	for key, h := range s.held {
		delete(s.held, key)
		unused = append(unused, h.inf)
	}
	s.mu.Unlock()
	release(unused)
}

// Keys are the keys of the informers held for any of uses (for any use, if none is given), as
// the cache keys them, in a stable order.
func (s *Set) Keys(uses ...Use) []cache.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []cache.Key
	for _, h := range s.held {
		if !h.heldFor(uses) {
			continue
		}
		if k := h.inf.Key(); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b cache.Key) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

func (h *held) heldFor(uses []Use) bool {
	if len(uses) == 0 {
		return true
	}
	for _, u := range uses {
		if h.count[u] > 0 {
			return true
		}
	}
	return false
}

// Informers are the informers u holds.
func (s *Set) Informers(u Use) []*cache.Informer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*cache.Informer
	for _, h := range s.held {
		if h.count[u] > 0 {
			out = append(out, h.inf)
		}
	}
	return out
}

// For lends u's informers to a holder that acquires and releases them by key, as a source
// does (see source.Informers).
func (s *Set) For(u Use) Lender { return Lender{set: s, use: u} }

// Lender is a Set's informers for one use.
type Lender struct {
	set *Set
	use Use
}

// Acquire holds key once more for the lender's use.
func (l Lender) Acquire(key cache.Key) (*cache.Informer, error) { return l.set.Acquire(l.use, key) }

// Release lets go of one hold of key by the lender's use.
func (l Lender) Release(key cache.Key) { l.set.Release(l.use, key) }
