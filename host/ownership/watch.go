package ownership

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// seen is a Lease as last observed, and when it last changed, by this replica's clock: a Lease
// has expired when it has not changed for its duration (clocks of replicas are not compared).
type seen struct {
	lease   *coordinationv1.Lease
	version string
	at      time.Time
}

// saw records a Lease added or changed: when it changed is when its expiry counts from. A
// change of holder wakes the table.
func (t *Table) saw(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, known := t.seen[l.Name]
	if known && s.version == l.ResourceVersion {
		return
	}
	t.seen[l.Name] = seen{lease: l, version: l.ResourceVersion, at: t.clock.Now()}
	if !known || holder(s.lease) != holder(l) {
		t.poke()
	}
}

func (t *Table) gone(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, l.Name)
	t.poke()
}

// nextExpiry is when the first Lease held by another replica expires if it is not renewed
// (zero if none).
func (t *Table) nextExpiry() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	for _, s := range t.seen {
		if h := holder(s.lease); h == "" || h == t.opts.Identity {
			continue
		}
		e := s.at.Add(t.durationOf(s))
		if e.After(t.clock.Now()) && (first.IsZero() || e.Before(first)) {
			first = e
		}
	}
	return first
}

// watchDeadlines lets go of a unit the moment its renew deadline passes, whatever the Lease
// calls are doing: a call that hangs must not keep a unit running past it.
func (t *Table) watchDeadlines(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := t.clock.NewTicker(t.opts.RetryPeriod / 4)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C():
				t.mu.Lock()
				for _, u := range t.sortedUnits() {
					if u.held && now.Sub(u.renewed) > t.opts.RenewDeadline {
						t.lose(u, fmt.Sprintf("its Lease was not renewed for %s (the renew deadline)", t.opts.RenewDeadline))
					}
				}
				t.mu.Unlock()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// observe counts the live replicas from the Leases seen: those renewed within their duration,
// by the renew time they carry. (A count off by a skewed clock only moves the fair share for a
// while; which replica may run a unit is decided by unit Leases, by this replica's clock.) The
// caller holds t.mu.
func (t *Table) observe(now time.Time) {
	var replicas []string
	for _, s := range t.seen {
		if s.lease.Labels[RoleLabel] == RoleReplica && t.replicaLive(s, now) {
			replicas = append(replicas, holder(s.lease))
		}
	}
	if !slices.Contains(replicas, t.opts.Identity) {
		replicas = append(replicas, t.opts.Identity)
	}
	slices.Sort(replicas)
	joined := make(map[string]time.Time, len(replicas))
	for _, r := range replicas {
		if at, ok := t.joined[r]; ok {
			joined[r] = at
		} else {
			joined[r] = now
		}
	}
	t.joined = joined
	if !slices.Equal(replicas, t.replicas) {
		t.log.Info("replicas changed", "replicas", len(replicas), "identities", replicas)
		close(t.replicasChanged)
		t.replicasChanged = make(chan struct{})
	}
	t.replicas = replicas
}

func (t *Table) replicaLive(s seen, now time.Time) bool {
	r := s.lease.Spec.RenewTime
	return holder(s.lease) != "" && r != nil && now.Before(r.Add(t.durationOf(s))) && !t.expired(s, now)
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// expired: held by nobody, or unchanged for longer than its duration.
func (t *Table) expired(s seen, now time.Time) bool {
	if holder(s.lease) == "" {
		return true
	}
	return now.After(s.at.Add(t.durationOf(s)))
}

func (t *Table) durationOf(s seen) time.Duration {
	if d := s.lease.Spec.LeaseDurationSeconds; d != nil {
		return time.Duration(*d) * time.Second
	}
	return t.opts.LeaseDuration
}
