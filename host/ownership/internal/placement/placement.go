package placement

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/wasmrec/wasmrec/host/shard"
)

// Lease is a unit's Lease as this replica sees it.
type Lease struct {
	// Holder is the live replica holding it: "" when it was handed back or has expired.
	Holder string
	// Since is when a change to it was last seen, by this replica's clock.
	Since time.Time
	// OfferedTo is the replica it was handed back to, to spread a plugin's shards; that replica
	// may take it while at its share.
	OfferedTo string
}

// Unit is a unit this replica claims, and its state here.
type Unit struct {
	Name string
	// Held: this replica holds its Lease and may run it.
	Held bool
	// Releasing: let go of, its Lease not handed back yet.
	Releasing bool
	// Running: a run still holds it; it cannot be taken again until that run returns.
	Running bool
	// SpreadTried is when this replica last let it go to spread its plugin's shards.
	SpreadTried time.Time
}

// View is one replica's view of its group at one moment.
type View struct {
	// Self is this replica's identity.
	Self string
	// Replicas are the live replicas, Self among them.
	Replicas []string
	// Units are the units this replica claims (every replica claims the same ones, but for a
	// moment while a plugin is added, removed or resharded).
	Units []Unit
	// Leases are the group's unit Leases seen, by unit name; a unit with none was never taken.
	Leases map[string]Lease
	// Now is the time of the view, by this replica's clock.
	Now time.Time
	// BalanceFrom is when this replica began taking units: replicas started together see each
	// other first. A unit free since before it counts as let go of then.
	BalanceFrom time.Time
	// LastSpread is when this replica last let a unit go to spread a plugin's shards.
	LastSpread time.Time
	// Joined is when each live replica was first seen live. A replica that joined less than a
	// retry period ago takes no unit yet (it waits to see the others), so none is let go of
	// for it until then: the units keep running where they are meanwhile. A replica missing
	// here counts as joined long ago.
	Joined map[string]time.Time
	// RetryPeriod is how long a unit let go of is left to the replica first in line for it, and
	// the least time between two units let go of to spread.
	RetryPeriod time.Duration
	// SpreadBackoff is how long a unit let go of to spread is not let go of again for that.
	SpreadBackoff time.Duration
}

// Reason says why a unit is let go of.
type Reason int

const (
	// OverShare: this replica holds more than its share.
	OverShare Reason = iota
	// Floor: another replica holds less than the share rounded down, and this one holds most.
	Floor
	// Spread: another replica under its share holds less of the unit's plugin.
	Spread
	// Exchange: every replica is at its share; one at it that holds less of the unit's plugin
	// is offered the unit, and gives back one of its own.
	Exchange
)

// Release is a unit to let go of.
type Release struct {
	Unit   string
	Reason Reason
	// To is, for Spread and Exchange, the replica expected to take it. An Exchange offers it
	// to To in the Lease handed back.
	To string
}

// Decision is what a replica does next: let go of some units, take others.
type Decision struct {
	Release []Release
	// Take are the units to take, in order.
	Take []string
	// RetryAt, when not zero, is when a unit left to another replica may be taken here: decide
	// again then.
	RetryAt time.Time
}

// Decide is the placement of one replica: what it lets go of and what it takes, from its view.
func Decide(v View) Decision {
	p := newPlan(v)
	var d Decision
	d.Release = p.release()
	d.Take, d.RetryAt = p.take()
	if !p.retryAt.IsZero() && (d.RetryAt.IsZero() || p.retryAt.Before(d.RetryAt)) {
		d.RetryAt = p.retryAt
	}
	return d
}

// plan is the state Decide works on.
type plan struct {
	v     View
	fair  int // the share: units / replicas, rounded up
	floor int // the share rounded down

	units     []*Unit        // by this replica's preference, most preferred first
	groupSize map[string]int // units claimed, by plugin

	// Counted from the Leases seen (not from this round's decisions).
	heldBy  map[string]int            // units held, by replica
	inGroup map[string]map[string]int // units held, by plugin, then by replica

	ranks   map[string][]string // Rank of each unit, as asked
	retryAt time.Time           // when to decide again, if sooner than what take finds

	// This replica's own, as this round decides.
	held      int            // units held, not counting those let go of
	letting   int            // units let go of whose Leases are not handed back yet
	groupHeld map[string]int // units held, by plugin
}

func newPlan(v View) *plan {
	n := max(len(v.Replicas), 1)
	p := &plan{
		v:         v,
		fair:      (len(v.Units) + n - 1) / n,
		floor:     len(v.Units) / n,
		groupSize: map[string]int{},
		heldBy:    map[string]int{},
		inGroup:   map[string]map[string]int{},
		groupHeld: map[string]int{},
		ranks:     map[string][]string{},
	}
	for name, l := range v.Leases {
		if l.Holder == "" {
			continue
		}
		p.heldBy[l.Holder]++
		g := group(name)
		if p.inGroup[g] == nil {
			p.inGroup[g] = map[string]int{}
		}
		p.inGroup[g][l.Holder]++
	}
	places := map[string]int{}
	for i := range v.Units {
		u := &v.Units[i]
		p.units = append(p.units, u)
		p.groupSize[group(u.Name)]++
		places[u.Name] = slices.Index(p.rank(u.Name), v.Self)
		switch {
		case u.Held:
			p.held++
			p.groupHeld[group(u.Name)]++
		case u.Releasing:
			p.letting++
		}
	}
	// Most preferred first: the units this replica comes first for, then second, ...; among
	// equals, the units of larger groups first (a plugin's shards, each preferred by another
	// replica, before plugins any replica may run), then by hash.
	slices.SortStableFunc(p.units, func(a, b *Unit) int {
		return cmp.Or(cmp.Compare(places[a.Name], places[b.Name]),
			cmp.Compare(p.groupSize[group(b.Name)], p.groupSize[group(a.Name)]),
			cmp.Compare(score(v.Self, b.Name), score(v.Self, a.Name)),
			strings.Compare(a.Name, b.Name))
	})
	return p
}

// rank is Rank(p.v.Replicas, unit), computed once.
func (p *plan) rank(unit string) []string {
	r, ok := p.ranks[unit]
	if !ok {
		r = Rank(p.v.Replicas, unit)
		p.ranks[unit] = r
	}
	return r
}

// groupShare is the share of one plugin's shards a replica may hold without crowding it.
func (p *plan) groupShare(g string) int {
	n := max(len(p.v.Replicas), 1)
	return (p.groupSize[g] + n - 1) / n
}

// crowded: this replica holds more of u's plugin than the plugin's share, so that letting go
// of u spreads the plugin over the replicas.
func (p *plan) crowded(u *Unit) bool {
	g := group(u.Name)
	return p.groupHeld[g] > p.groupShare(g)
}

func (p *plan) release() []Release {
	var out []Release
	let := func(u *Unit, r Release) {
		u.Held, u.Releasing = false, true
		p.held--
		p.groupHeld[group(u.Name)]--
		out = append(out, r)
	}
	releasing := p.letting > 0
	// While a replica that joined is not taking units yet, keep them running here.
	if at := p.newcomerReady(); !at.IsZero() {
		p.retryAt = at
		return nil
	}
	// Over the share, let go of the surplus. At the share, while a replica is below the share
	// rounded down (10 units on 3 replicas: 4, 4 and 2), the replica holding most (the first by
	// identity among equals) lets one go, so the split ends 4, 3 and 3.
	// (When the units divide evenly, a replica below the share has one over it to take from,
	// which lets go by the first rule: this one would only answer a view gone stale.)
	keep, why := p.fair, OverShare
	if p.fair > p.floor && p.held == p.fair && !releasing && p.richestWhileOneStarves() {
		keep, why = p.fair-1, Floor
	}
	// The least preferred first: shards of a crowded plugin, then plugins not split, then shards
	// whose next holder is not crowded by them, then the rest.
	const crowdedShards, whole, spreading, rest = 0, 1, 2, 3
	for _, pass := range []int{crowdedShards, whole, spreading, rest} {
		for i := len(p.units) - 1; i >= 0 && p.held > keep; i-- {
			u := p.units[i]
			if !u.Held {
				continue
			}
			ok := false
			switch pass {
			case crowdedShards:
				ok = p.crowded(u)
			case whole:
				ok = p.groupSize[group(u.Name)] == 1
			case spreading:
				_, ok = p.firstInLine(u.Name)
			case rest:
				ok = true
			}
			if ok {
				let(u, Release{Unit: u.Name, Reason: why})
			}
		}
	}
	// At or under its share, a replica holding more than its share of a plugin's shards lets
	// one go: to a replica with room that holds less of the plugin, or, when every replica is
	// at its share, to one at it that holds less of the plugin and gives one back. One at a
	// time, at most one a retry period, and once a unit came back (no other replica took it),
	// not again for a while.
	if p.held <= keep && !releasing && p.v.Now.Sub(p.v.LastSpread) >= p.v.RetryPeriod {
		for i := len(p.units) - 1; i >= 0; i-- {
			u := p.units[i]
			if !u.Held || !p.crowded(u) || p.v.Now.Sub(u.SpreadTried) < p.v.SpreadBackoff {
				continue
			}
			if r, spreads := p.firstInLine(u.Name); spreads && r != p.v.Self {
				let(u, Release{Unit: u.Name, Reason: Spread, To: r})
			} else if r := p.exchangeWith(u.Name); r != "" {
				let(u, Release{Unit: u.Name, Reason: Exchange, To: r})
			}
			break
		}
	}
	return out
}

func (p *plan) take() (take []string, retryAt time.Time) {
	// Units let go of still count until handed back: taking more meanwhile would only hold more
	// than the share for a moment.
	held := p.held + p.letting
	limit := p.fair
	// While a replica is below the share rounded down, one at or above it takes nothing.
	if p.starving() && held >= p.floor {
		limit = held
	}
	for _, u := range p.units {
		if u.Held || u.Releasing || u.Running {
			continue
		}
		l, exists := p.v.Leases[u.Name]
		if exists && l.Holder != "" {
			continue
		}
		g := group(u.Name)
		// A unit offered here to spread its plugin is taken at the share too, and one over it
		// is let go of next.
		offered := exists && l.OfferedTo == p.v.Self && held <= p.fair && p.inGroup[g][p.v.Self] < p.groupShare(g)
		if held >= limit && !offered {
			continue
		}
		// A unit let go of is left for a retry period (from when it was let go of, or from when
		// this replica began taking units, whichever is later) to the replica first in line for
		// it, or to the one it was offered to: the replica that kept it warm takes it, and the
		// shards of a plugin go to the replicas they prefer, which differ.
		since := p.v.BalanceFrom
		if exists && l.Since.After(since) {
			since = l.Since
		}
		if p.v.Now.Sub(since) < p.v.RetryPeriod {
			first, _ := p.firstInLine(u.Name)
			if exists && l.OfferedTo != "" && slices.Contains(p.v.Replicas, l.OfferedTo) {
				first = l.OfferedTo
			}
			if first != p.v.Self {
				if again := since.Add(p.v.RetryPeriod); retryAt.IsZero() || again.Before(retryAt) {
					retryAt = again
				}
				continue
			}
		}
		take = append(take, u.Name)
		held++
	}
	return take, retryAt
}

// newcomerReady is when the last replica other than this one that joined less than a retry
// period ago begins to take units; zero if none did.
func (p *plan) newcomerReady() time.Time {
	var last time.Time
	for _, r := range p.v.Replicas {
		at, ok := p.v.Joined[r]
		if r == p.v.Self || !ok {
			continue
		}
		if ready := at.Add(p.v.RetryPeriod); p.v.Now.Before(ready) && ready.After(last) {
			last = ready
		}
	}
	return last
}

// starving reports whether a live replica other than this one holds fewer units than the share
// rounded down.
func (p *plan) starving() bool {
	for _, r := range p.v.Replicas {
		if r != p.v.Self && p.heldBy[r] < p.floor {
			return true
		}
	}
	return false
}

// richestWhileOneStarves reports whether a live replica holds fewer units than the share
// rounded down while this one holds most (the first by identity among equals), every unit
// being held.
func (p *plan) richestWhileOneStarves() bool {
	// While a unit is free, the replica below the floor takes it: letting go of one more would
	// only pass units back and forth (16 units on 2 replicas, 8 and 7 while one is free).
	total := 0
	for _, r := range p.v.Replicas {
		total += p.heldBy[r]
	}
	if total < len(p.v.Units) {
		return false
	}
	starving, richest := false, p.v.Self
	for _, r := range p.v.Replicas {
		if p.heldBy[r] < p.floor {
			starving = true
		}
		if p.heldBy[r] > p.heldBy[richest] || (p.heldBy[r] == p.heldBy[richest] && r < richest) {
			richest = r
		}
	}
	return starving && richest == p.v.Self && p.heldBy[richest] >= p.fair
}

// firstInLine is the live replica under the share that prefers unit most: below the share
// rounded down before below the share, and among those, one that holds less than its share of
// the unit's plugin before one that does not (spreads). Self if none is under the share.
func (p *plan) firstInLine(unit string) (replica string, spreads bool) {
	g := group(unit)
	share := p.groupShare(g)
	for _, below := range []int{p.floor, p.fair} {
		for _, spread := range []bool{true, false} {
			for _, r := range p.rank(unit) {
				if p.heldBy[r] < below && (!spread || p.inGroup[g][r] < share) {
					return r, spread
				}
			}
		}
	}
	return p.v.Self, false
}

// exchangeWith is the live replica other than this one, at or under its share, that holds less
// than its share of unit's plugin and prefers unit most; "" if none.
func (p *plan) exchangeWith(unit string) string {
	g := group(unit)
	for _, r := range p.rank(unit) {
		if r != p.v.Self && p.heldBy[r] <= p.fair && p.inGroup[g][r] < p.groupShare(g) {
			return r
		}
	}
	return ""
}

// group is the plugin a unit belongs to.
func group(unit string) string {
	g, _, _ := shard.SplitUnit(unit)
	return g
}

// score is how much replica prefers key: rendezvous hashing.
func score(replica, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(replica))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return h.Sum64()
}

// Rank orders replicas by their preference for unit, most first: rendezvous hashing of its
// plugin, turned by its shard index, so that the shards of a plugin are first preferred by
// different replicas, and spread.
func Rank(replicas []string, unit string) []string {
	g, index, _ := shard.SplitUnit(unit)
	out := slices.Clone(replicas)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(score(b, g), score(a, g)), strings.Compare(a, b))
	})
	if len(out) > 0 {
		k := index % len(out)
		out = slices.Concat(out[k:], out[:k])
	}
	return out
}

// Standby reports whether self would take unit over first if its holder went: it ranks first
// for it among the live replicas other than the holder.
func Standby(replicas []string, self, holder, unit string) bool {
	for _, r := range Rank(replicas, unit) {
		if r != holder {
			return r == self
		}
	}
	return false
}
