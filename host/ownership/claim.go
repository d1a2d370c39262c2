package ownership

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Claim registers units (names of DNS labels, with "/" between parts: "plugin" or
// "plugin/0"); this replica competes for them from now on. Close the claim to stop.
func (t *Table) Claim(names ...string) (*Claim, error) {
	c := &Claim{t: t, names: names, changed: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		if _, ok := t.units[n]; ok {
			return nil, fmt.Errorf("ownership: unit %q is claimed twice", n)
		}
	}
	for _, n := range names {
		t.units[n] = &unit{name: n, lease: t.leaseName(n), claim: c}
	}
	t.poke()
	return c, nil
}

// Claim is a set of units one runner runs.
type Claim struct {
	t     *Table
	names []string

	// Guarded by t.mu.
	changed chan struct{} // closed and replaced when a unit's state changes
	running []string      // the units the run going now holds
	closed  bool

	// validUntil is when the run going now stops being safe: the renew deadline of the
	// least recently renewed unit it holds. Nil while none is safe. See Fresh.
	validUntil atomic.Pointer[time.Time]
}

// Fresh reports whether the run going now may still act for its units: each is held (or let go
// of and not handed back yet) and was renewed within the renew deadline. The table lets go of a
// unit at its deadline anyway, but a process paused past it (a stopped container, a long GC
// pause, a suspended VM) runs again before that timer fires: its reconciles and writes check
// Fresh, so that they do not act on a unit another replica may have taken. It takes no lock.
func (c *Claim) Fresh() bool {
	v := c.validUntil.Load()
	return v != nil && c.t.clock.Now().Before(*v)
}

// refreshLocked recomputes validUntil. The caller holds t.mu.
func (c *Claim) refreshLocked() {
	var until time.Time
	for i, n := range c.running {
		u := c.t.units[n]
		if u == nil || !(u.held || u.releasing) {
			c.validUntil.Store(nil)
			return
		}
		if d := u.renewed.Add(c.t.opts.RenewDeadline); i == 0 || d.Before(until) {
			until = d
		}
	}
	if len(c.running) == 0 {
		c.validUntil.Store(nil)
		return
	}
	c.validUntil.Store(&until)
}

func (c *Claim) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// runs reports whether the run going now holds unitName. The caller holds t.mu.
func (c *Claim) runs(unitName string) bool { return slices.Contains(c.running, unitName) }

// State is what this replica holds of a claim's units and what it would take over next.
type State struct {
	Held, Standby []string
}

// State returns the claim's state now, and a channel closed when it changes.
func (c *Claim) State() (State, <-chan struct{}) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.stateLocked(), c.changed
}

func (c *Claim) stateLocked() State {
	var s State
	for _, n := range c.names {
		u := c.t.units[n]
		if u == nil { // closed
			continue
		}
		if u.held {
			s.Held = append(s.Held, n)
		}
		if u.standby {
			s.Standby = append(s.Standby, n)
		}
	}
	return s
}

// Run runs run(ctx, held) while this replica holds any of the claim's units, with the units it
// holds: when they change, it cancels run, waits for it to return, and calls it again with the
// new set. A unit let go of is handed back only after run has returned. It returns nil when ctx
// is done, or run's error when run fails by itself; what a run cancelled (by ctx or by a change)
// returns is not an error.
func (c *Claim) Run(ctx context.Context, run func(ctx context.Context, held []string) error) error {
	for {
		// What runs is marked in the same breath as it is read, so that nothing is handed back
		// between the two.
		c.t.mu.Lock()
		var changed <-chan struct{}
		s := c.stateLocked()
		changed = c.changed
		c.running = s.Held
		c.refreshLocked()
		c.t.mu.Unlock()
		if len(s.Held) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				continue
			}
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(runCtx, s.Held) }()
		var err error
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-changed:
				next, ch := c.State()
				if slices.Equal(next.Held, s.Held) {
					changed = ch // only standby changed
					continue
				}
				cancel()
				<-done // cancelled for the change: what it returns is the cancellation's
				break wait
			}
		}
		cancel()
		c.t.mu.Lock()
		c.running = nil
		c.refreshLocked()
		c.t.mu.Unlock()
		c.t.poke() // hand back at once what was let go of
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Close withdraws the claim: its units are let go of and forgotten. Their Leases are handed
// back once no run holds them, by the table's next round.
func (c *Claim) Close() {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, n := range c.names {
		u := c.t.units[n]
		if u.held {
			u.held, u.releasing = false, true
			c.t.changed(u)
		}
		delete(c.t.units, n)
		c.t.closing = append(c.t.closing, u)
	}
	c.t.poke()
}
