package wasm

import "sync/atomic"

// Stats counts what happened to a module's instances, as Module.Stats read it. Each count is read
// on its own, while the module may be serving reconciles: two of them are not taken at one
// instant (Live, read first, may miss an instance that Instantiated, read after it, counts).
type Stats struct {
	Live                              int64 // instances alive now, idle or busy
	Instantiated, Discarded, Recycled int64
	IdleClosed                        int64 // closed after IdleTimeout with nothing to do
	FromSnapshot                      int64 // instances started from a snapshot
	CodeReleases, CodeReloads         int64 // the compiled module let go, and loaded again
	Traps, Timeouts, BadResults       int64
	LogDroppedLines, LogDroppedBytes  int64 // guest output past the LogLimit
	// SnapshotBytes is what the module holds of its snapshot, in the Go heap, until its code is
	// let go: the blocks of memory its initialisation wrote, less those another snapshot of the
	// same code holds. 0 when it has none.
	SnapshotBytes int64
}

// counters are what Stats reads: the module adds to them from every reconcile, pool timer and
// instantiation, without a lock, and only the module does.
type counters struct {
	live                              atomic.Int64
	instantiated, discarded, recycled atomic.Int64
	idleClosed                        atomic.Int64
	fromSnapshot                      atomic.Int64
	codeReleases, codeReloads         atomic.Int64
	traps, timeouts, badResults       atomic.Int64
	logDroppedLines, logDroppedBytes  atomic.Int64
	snapshotBytes                     atomic.Int64 // set with Module.snap, under codeMu
}

// read copies the counters into a Stats, one at a time.
func (c *counters) read() Stats {
	return Stats{
		Live:            c.live.Load(),
		Instantiated:    c.instantiated.Load(),
		Discarded:       c.discarded.Load(),
		Recycled:        c.recycled.Load(),
		IdleClosed:      c.idleClosed.Load(),
		FromSnapshot:    c.fromSnapshot.Load(),
		CodeReleases:    c.codeReleases.Load(),
		CodeReloads:     c.codeReloads.Load(),
		Traps:           c.traps.Load(),
		Timeouts:        c.timeouts.Load(),
		BadResults:      c.badResults.Load(),
		LogDroppedLines: c.logDroppedLines.Load(),
		LogDroppedBytes: c.logDroppedBytes.Load(),
		SnapshotBytes:   c.snapshotBytes.Load(),
	}
}
