package wasm

import (
	"runtime/debug"
	"sync"
	"time"
)

// reclaimDelay is how long after a release its collections wait, so that the releases of a
// moment (a host stopping, a CRD gone, a swap) share them.
const reclaimDelay = 100 * time.Millisecond

// reclaimer gives released code's memory back to the OS: wazero unmaps a compiled module's
// machine code (tens of MiB for a Go guest) in a finalizer, which runs after the collection
// that finds it garbage, and its decoded module goes back with the heap that collection frees.
// Left to the Go runtime, that collection comes only when the heap doubles again. So two forced
// collections (debug.FreeOSMemory) run soon after a release: the first finds the code garbage
// and queues its finalizers, the second returns what they freed.
//
// One pair serves every release meanwhile: a forced collection costs a full mark of the host's
// heap, so the releases of a moment must not each pay for one. Instances' memories need none:
// they are outside the Go heap and unmapped as their instances close (linearmem).
type reclaimer struct {
	mu    sync.Mutex
	extra int    // collections still to run
	force func() // debug.FreeOSMemory; tests replace it
	runs  int    // collections run, for tests
}

// soon runs two collections soon.
func (r *reclaimer) soon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.extra == 0 {
		time.AfterFunc(reclaimDelay, r.run)
	}
	r.extra = 2
}

func newReclaimer() *reclaimer { return &reclaimer{force: debug.FreeOSMemory} }

func (r *reclaimer) run() {
	r.mu.Lock()
	force := r.force
	r.mu.Unlock()
	force()

	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs++
	r.extra--
	if r.extra > 0 {
		time.AfterFunc(reclaimDelay, r.run)
	}
}

// runsSoFar is what tests look at: collections run.
func (r *reclaimer) runsSoFar() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs
}
