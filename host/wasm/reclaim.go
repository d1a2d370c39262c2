package wasm

import (
	"runtime/debug"
	"sync"
	"time"
	"weak"

	"github.com/go-logr/logr"
)

// Reclaim bounds: the first release comes soon after a module closes, so the closes of a
// moment (a host stopping, a CRD gone, a swap) share it; the last is about a minute later.
const (
	reclaimFirst = 100 * time.Millisecond
	reclaimLast  = 30 * time.Second
)

// reclaimer gives the memory of closed modules' instances back to the OS once it is garbage.
// An instance's memory is up to its memory limit, and the Go runtime returns freed memory at its
// own slow pace, and collects it at all only when the heap doubles again: a host kept 1 GiB of a
// deleted plugin's 20 s after. So each closed instance's memory is remembered weakly; a forced
// collection (debug.FreeOSMemory) runs soon after, and again, each time twice as late, while any
// of it is still reachable (an instance still in a reconcile that will not be interrupted, a
// caller still holding a slice of it), until all of it has been released or reclaimLast.
//
// One collection serves every module closed meanwhile: a forced collection costs a full mark
// of the host's heap, so the closes of a moment must not each pay for one.
type reclaimer struct {
	log logr.Logger

	mu      sync.Mutex
	pending []weak.Pointer[byte] // closed instances' memory, not yet seen collected
	delay   time.Duration        // until the next collection; 0 when none is scheduled
	force   func()               // debug.FreeOSMemory; tests replace it
	runs    int                  // collections run, for tests
	extra   int                  // collections still to run for soon, whatever is pending
}

// soon runs two collections soon, for memory not tracked by add: released compiled code, whose
// machine code wazero unmaps in a finalizer (which runs after the collection that finds it
// garbage) and whose decoded module goes back with the heap the collection frees.
func (r *reclaimer) soon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.extra = max(r.extra, 2)
	if r.delay == 0 {
		r.delay = reclaimFirst
		time.AfterFunc(r.delay, r.run)
	}
}

func newReclaimer(log logr.Logger) *reclaimer {
	return &reclaimer{log: log, force: debug.FreeOSMemory}
}

// add remembers mem, the memory of an instance just closed.
func (r *reclaimer) add(mem []byte) {
	if len(mem) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, weak.Make(&mem[0]))
	if r.delay == 0 {
		r.delay = reclaimFirst
		time.AfterFunc(r.delay, r.run)
	}
}

func (r *reclaimer) run() {
	r.mu.Lock()
	force := r.force
	r.mu.Unlock()
	force()

	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs++
	held := r.pending[:0]
	for _, p := range r.pending {
		if p.Value() != nil {
			held = append(held, p)
		}
	}
	clear(r.pending[len(held):])
	r.pending = held
	if r.extra > 0 {
		r.extra--
	}
	switch {
	case len(held) == 0 && r.extra == 0:
		r.delay = 0
	case len(held) == 0: // one more, asked for by soon
		r.delay = reclaimFirst
		time.AfterFunc(r.delay, r.run)
	case r.delay >= reclaimLast:
		r.log.Info("the memory of closed plugin instances is still held; the Go runtime returns it when it collects next", "instances", len(held))
		r.pending, r.delay = nil, 0
	default:
		r.delay = min(2*r.delay, reclaimLast)
		time.AfterFunc(r.delay, r.run)
	}
}

// state is what tests look at: instances whose memory is still reachable, collections run.
func (r *reclaimer) state() (pending, runs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending), r.runs
}
