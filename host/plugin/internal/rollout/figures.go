package rollout

import (
	"fmt"
	"sync/atomic"

	"github.com/wasmrec/wasmrec/abi"
)

// Outcome is what one reconcile of a version did.
type Outcome struct {
	Failed   bool // it returned an error (a result marked failed, or a malformed one)
	Panicked bool // its guest trapped
	TimedOut bool // it was stopped at its timeout
	Writes   int  // the writes it asked for (create, update, patch, delete, events)
	Refused  int  // of those, the ones refused as forbidden, invalid or malformed
}

// Figures are one version's counts over a step.
type Figures struct {
	Reconciles    int64 `json:"reconciles"`
	Errors        int64 `json:"errors"`
	Panics        int64 `json:"panics"`
	Timeouts      int64 `json:"timeouts"`
	Writes        int64 `json:"writes"`
	RefusedWrites int64 `json:"refusedWrites"`
}

// String is "120 reconciles: 3 errors, 0 panics, 0 timeouts, 0 of 40 writes refused".
func (f Figures) String() string {
	return fmt.Sprintf("%d reconciles: %d errors, %d panics, %d timeouts, %d of %d writes refused",
		f.Reconciles, f.Errors, f.Panics, f.Timeouts, f.RefusedWrites, f.Writes)
}

// Counter counts a version's outcomes. It is safe for concurrent use.
type Counter struct {
	reconciles, errors, panics, timeouts, writes, refused atomic.Int64
}

// Add counts one reconcile.
func (c *Counter) Add(o Outcome) {
	c.reconciles.Add(1)
	switch {
	case o.Panicked:
		c.panics.Add(1)
	case o.TimedOut:
		c.timeouts.Add(1)
	case o.Failed:
		c.errors.Add(1)
	}
	c.writes.Add(int64(o.Writes))
	c.refused.Add(int64(o.Refused))
}

// Figures are the counts so far.
func (c *Counter) Figures() Figures {
	return Figures{Reconciles: c.reconciles.Load(), Errors: c.errors.Load(), Panics: c.panics.Load(),
		Timeouts: c.timeouts.Load(), Writes: c.writes.Load(), RefusedWrites: c.refused.Load()}
}

// Differences are what the shadow step found between the versions' reconciles of one key.
type Differences struct {
	Compared int64 `json:"compared"` // reconciles run by both and compared
	Writes   int64 `json:"writes"`   // of those, the ones whose writes differ
	Results  int64 `json:"results"`  // the ones whose results differ
	Skipped  int64 `json:"skipped"`  // live reconciles not shadowed: every shadow instance was busy
}

// DiffCounter counts Differences. It is safe for concurrent use.
type DiffCounter struct {
	compared, writes, results, skipped atomic.Int64
}

// Add counts one comparison.
func (d *DiffCounter) Add(writesDiffer, resultDiffers bool) {
	d.compared.Add(1)
	if writesDiffer {
		d.writes.Add(1)
	}
	if resultDiffers {
		d.results.Add(1)
	}
}

// Skip counts a live reconcile that was not shadowed.
func (d *DiffCounter) Skip() { d.skipped.Add(1) }

// Differences are the counts so far.
func (d *DiffCounter) Differences() Differences {
	return Differences{Compared: d.compared.Load(), Writes: d.writes.Load(), Results: d.results.Load(), Skipped: d.skipped.Load()}
}

// Verdict is a step's judgement so far.
type Verdict int

const (
	// Pending: the new version has made too few reconciles in the step to judge.
	Pending Verdict = iota
	// Within: its rates are within tolerance of the live version's.
	Within
	// Beyond: one of its rates is beyond tolerance: roll back.
	Beyond
)

// Judge compares the new version's figures over a step with the live version's (in the shadow
// step, over the same keys; in a canary step, over the keys each reconciled). why says which
// rate is beyond tolerance, with both versions' figures.
func (a Analysis) Judge(step Step, live, cand Figures, diffs Differences) (v Verdict, why string) {
	switch {
	case cand.Reconciles < int64(step.MinReconciles):
		return Pending, ""
	case cand.Reconciles == 0:
		return Within, "" // a step that needs none, with none: nothing to hold against it
	}
	t := a.Tolerance
	rates := []struct {
		name      string
		tol       *float64
		def       float64
		c, cn     int64
		l, ln     int64
		judgeable bool
	}{
		{"error", t.Errors, DefaultErrors, cand.Errors, cand.Reconciles, live.Errors, live.Reconciles, true},
		{"panic", t.Panics, DefaultPanics, cand.Panics, cand.Reconciles, live.Panics, live.Reconciles, true},
		{"timeout", t.Timeouts, DefaultTimeouts, cand.Timeouts, cand.Reconciles, live.Timeouts, live.Reconciles, true},
		{"refused-write", t.RefusedWrites, DefaultRefusedWrites, cand.RefusedWrites, cand.Writes, live.RefusedWrites, live.Writes, true},
		{"differing-write", t.DifferingWrites, 0, diffs.Writes, diffs.Compared, 0, 0, step.Shadow() && t.DifferingWrites != nil},
	}
	for _, r := range rates {
		if !r.judgeable {
			continue
		}
		tol := r.def
		if r.tol != nil {
			tol = *r.tol
		}
		cr, lr := rate(r.c, r.cn), rate(r.l, r.ln)
		if cr > lr+tol+1e-12 {
			return Beyond, fmt.Sprintf("its %s rate over the %s step is %s (%d of %d), the live version's %s (%d of %d), and the tolerance %s",
				r.name, step.Name(), percent(cr), r.c, r.cn, percent(lr), r.l, r.ln, percent(tol))
		}
	}
	return Within, ""
}

func rate(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func percent(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

// RefusedStatus reports whether a write that ended with s counts as refused: the host or the
// API server would not take it (forbidden, invalid, malformed, too large). Conflicts, missing
// objects and an API server away are a controller's daily weather, not the version's fault.
func RefusedStatus(s abi.Status) bool {
	switch s {
	case abi.StatusForbidden, abi.StatusInvalid, abi.StatusBadRequest, abi.StatusTooLarge:
		return true
	}
	return false
}
