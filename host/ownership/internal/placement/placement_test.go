package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/host/shard"
)

// The tests run replicas against a simulated Lease store on a simulated clock, with the
// settings a user gets (Leases of 15 s, a renew deadline of 10 s, renewals every 2 s), and
// check after every step that no unit has two owners. Each replica decides from a snapshot of
// the store taken at the start of the step, as replicas deciding at once do, and its writes
// are compare-and-swap, as Lease updates are.

const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	tick          = 250 * time.Millisecond
)

type simLease struct {
	holder    string
	since     time.Time // last change
	offeredTo string
}

type simUnit struct {
	held, releasing bool
	renewed         time.Time
	offerTo         string
	spreadTried     time.Time
	stopsAt         time.Time // when the run of a unit let go of has returned
}

type simReplica struct {
	id          string
	units       map[string]*simUnit
	balanceFrom time.Time
	lastSpread  time.Time
	nextRenew   time.Time
	paused      bool
}

type sim struct {
	t        *testing.T
	rng      *rand.Rand
	now      time.Time
	units    []string
	leases   map[string]*simLease
	replicas map[string]*simReplica // live or paused processes
	renewed  map[string]time.Time   // replica Leases: last renewal
	joined   map[string]time.Time   // replica Leases: first renewal
	freed    map[string]time.Time   // units handed back, and when
	maxFree  time.Duration          // the longest a unit handed back waited to be taken
	moves    int                    // takes
	// stopDelay bounds how long the run of a unit let go of takes to return (a controller
	// finishing its reconciles): its Lease is handed back then.
	stopDelay time.Duration
	log       []string
}

func newSim(t *testing.T, seed uint64, units []string) *sim {
	return &sim{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: time.Unix(1_000_000, 0),
		units: units, leases: map[string]*simLease{}, replicas: map[string]*simReplica{}, renewed: map[string]time.Time{},
		joined: map[string]time.Time{}, freed: map[string]time.Time{},
		stopDelay: 3 * time.Second}
}

// start starts a replica: it renews its replica Lease at once and takes units one retry
// period later, as ownership.Table does.
func (s *sim) start(id string) {
	r := &simReplica{id: id, units: map[string]*simUnit{}, balanceFrom: s.now.Add(retryPeriod),
		nextRenew: s.now.Add(time.Duration(s.rng.Int64N(int64(retryPeriod))))}
	for _, u := range s.units {
		r.units[u] = &simUnit{}
	}
	s.replicas[id] = r
	s.renewed[id], s.joined[id] = s.now, s.now
}

// kill is SIGKILL: the replica stops; its Leases expire.
func (s *sim) kill(id string) { delete(s.replicas, id) }

// stop is SIGTERM: the replica hands back every unit and deletes its replica Lease.
func (s *sim) stop(id string) {
	r := s.replicas[id]
	for name, u := range r.units {
		if l := s.leases[name]; (u.held || u.releasing) && l != nil && l.holder == id {
			*l = simLease{since: s.now}
		}
	}
	delete(s.replicas, id)
	delete(s.renewed, id)
	delete(s.joined, id)
}

func (s *sim) expired(l *simLease) bool {
	return l.holder == "" || s.now.Sub(l.since) > leaseDuration
}

func (s *sim) liveReplicas() []string {
	var out []string
	for id, at := range s.renewed {
		if s.now.Sub(at) < leaseDuration {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// view is what r sees now.
func (s *sim) view(r *simReplica) View {
	v := View{Self: r.id, Replicas: s.liveReplicas(), Leases: map[string]Lease{}, Now: s.now, Joined: s.joined,
		BalanceFrom: r.balanceFrom, LastSpread: r.lastSpread, RetryPeriod: retryPeriod, SpreadBackoff: 10 * leaseDuration}
	if !slices.Contains(v.Replicas, r.id) {
		v.Replicas = append(v.Replicas, r.id)
		slices.Sort(v.Replicas)
	}
	for _, name := range s.units {
		u := r.units[name]
		v.Units = append(v.Units, Unit{Name: name, Held: u.held, Releasing: u.releasing, SpreadTried: u.spreadTried})
	}
	for name, l := range s.leases {
		pl := Lease{Since: l.since, OfferedTo: l.offeredTo}
		if !s.expired(l) {
			pl.Holder = l.holder
		}
		v.Leases[name] = pl
	}
	return v
}

// step advances the clock by a tick and lets every running replica renew, hand back and decide.
func (s *sim) step() {
	s.now = s.now.Add(tick)
	var running []*simReplica
	for _, r := range s.replicas {
		if !r.paused {
			running = append(running, r)
		}
	}
	s.rng.Shuffle(len(running), func(i, j int) { running[i], running[j] = running[j], running[i] })
	// Renewals, deadlines and hand-backs.
	for _, r := range running {
		for name, u := range r.units {
			if u.held && s.now.Sub(u.renewed) > renewDeadline {
				u.held = false // the renew deadline passed (a pause): stop at once
			}
			if l := s.leases[name]; u.held && (l == nil || l.holder != r.id) {
				u.held = false // another replica holds it now
			}
		}
		if !s.now.Before(r.nextRenew) {
			r.nextRenew = s.now.Add(retryPeriod)
			s.renewed[r.id] = s.now
			for name, u := range r.units {
				if u.held {
					s.leases[name].since, u.renewed = s.now, s.now
				}
			}
		}
		for name, u := range r.units {
			if u.releasing && !s.now.Before(u.stopsAt) {
				u.releasing = false
				if l := s.leases[name]; l != nil && l.holder == r.id {
					*l = simLease{since: s.now, offeredTo: u.offerTo}
					s.freed[name] = s.now
				}
				u.offerTo = ""
			}
		}
	}
	// Decisions from one snapshot, then writes that fail where another was faster.
	views := map[string]View{}
	for _, r := range running {
		if !s.now.Before(r.balanceFrom) {
			views[r.id] = s.view(r)
		}
	}
	for _, r := range running {
		v, ok := views[r.id]
		if !ok {
			continue
		}
		d := Decide(v)
		for _, rel := range d.Release {
			u := r.units[rel.Unit]
			if !u.held {
				s.t.Fatalf("%s lets go of %s, which it does not hold", r.id, rel.Unit)
			}
			u.held, u.releasing = false, true
			u.stopsAt = s.now.Add(time.Duration(s.rng.Int64N(int64(s.stopDelay) + 1)))
			if rel.Reason == Spread || rel.Reason == Exchange {
				u.spreadTried, r.lastSpread = s.now, s.now
			}
			if rel.Reason == Exchange {
				u.offerTo = rel.To
			}
			s.log = append(s.log, fmt.Sprintf("%s %s lets go of %s (%d, to %q)", s.now.Format("04:05.00"), r.id, rel.Unit, rel.Reason, rel.To))
		}
		for _, name := range d.Take {
			if l := s.leases[name]; l != nil && !s.expired(l) {
				continue // another replica was faster
			}
			s.leases[name] = &simLease{holder: r.id, since: s.now}
			if at, ok := s.freed[name]; ok {
				s.maxFree = max(s.maxFree, s.now.Sub(at))
				delete(s.freed, name)
			}
			r.units[name].held, r.units[name].renewed = true, s.now
			s.moves++
			s.log = append(s.log, fmt.Sprintf("%s %s takes %s", s.now.Format("04:05.00"), r.id, name))
		}
	}
	s.checkOneOwner()
}

// checkOneOwner fails when two replicas may act for one unit: each holds it and is within its
// renew deadline.
func (s *sim) checkOneOwner() {
	for _, name := range s.units {
		var owners []string
		for id, r := range s.replicas {
			if u := r.units[name]; (u.held || u.releasing) && s.now.Sub(u.renewed) <= renewDeadline {
				owners = append(owners, id)
			}
		}
		if len(owners) > 1 {
			s.t.Fatalf("%s: %s has two owners: %v\n%s", s.now.Format("04:05.00"), name, owners, s.history())
		}
	}
}

func (s *sim) history() string {
	from := max(0, len(s.log)-40)
	return strings.Join(s.log[from:], "\n")
}

// held is what each running replica holds.
func (s *sim) held() map[string][]string {
	out := map[string][]string{}
	for id, r := range s.replicas {
		out[id] = nil
		for name, u := range r.units {
			if u.held {
				out[id] = append(out[id], name)
			}
		}
		slices.Sort(out[id])
	}
	return out
}

// settled reports whether every unit is held once, each replica holds between the floor and
// the share, and (if spread) none holds more than its share of a plugin's shards.
func (s *sim) settled(spread bool) bool {
	held := s.held()
	n := len(held)
	floor, fair := len(s.units)/n, (len(s.units)+n-1)/n
	count := map[string]int{}
	for _, units := range held {
		if len(units) < floor || len(units) > fair {
			return false
		}
		perGroup := map[string]int{}
		for _, u := range units {
			count[u]++
			perGroup[group(u)]++
		}
		if spread {
			for g, c := range perGroup {
				if c > (groupSizeOf(s.units, g)+n-1)/n {
					return false
				}
			}
		}
	}
	for _, u := range s.units {
		if count[u] != 1 {
			return false
		}
	}
	return true
}

func groupSizeOf(units []string, g string) int {
	n := 0
	for _, u := range units {
		if group(u) == g {
			n++
		}
	}
	return n
}

// settle runs until settled and returns how long it took; it fails after limit.
func (s *sim) settle(spread bool, limit time.Duration) time.Duration {
	s.t.Helper()
	began := s.now
	for !s.settled(spread) {
		if s.now.Sub(began) > limit {
			s.t.Fatalf("not settled after %s: %v\n%s", limit, s.held(), s.history())
		}
		s.step()
	}
	return s.now.Sub(began)
}

// steady runs for d and fails if any unit moves: no flapping.
func (s *sim) steady(d time.Duration) {
	s.t.Helper()
	moves, before := s.moves, s.held()
	for end := s.now.Add(d); s.now.Before(end); {
		s.step()
	}
	if s.moves != moves {
		s.t.Fatalf("%d units moved in a settled group over %s: from %v to %v\n%s", s.moves-moves, d, before, s.held(), s.history())
	}
}

// twelveUnits: two plugins of 3 shards and 6 plugins not split.
func twelveUnits() []string {
	var units []string
	for _, p := range []string{"alpha", "beta"} {
		for i := range 3 {
			units = append(units, shard.Unit(p, i))
		}
	}
	for i := range 6 {
		units = append(units, fmt.Sprintf("plugin-%d", i))
	}
	return units
}

func replicaName(seed uint64, i int) string {
	return fmt.Sprintf("host-%d_%08x", i, seed*2654435761+uint64(i))
}

func TestStartTogetherSpreads(t *testing.T) {
	for seed := range uint64(3) {
		s := newSim(t, seed, twelveUnits())
		for i := range 3 {
			s.start(replicaName(seed, i))
		}
		s.settle(true, time.Minute)
		s.steady(30 * time.Second)
	}
}

func TestJoin(t *testing.T) {
	for seed := range uint64(3) {
		s := newSim(t, seed, twelveUnits())
		s.start(replicaName(seed, 0))
		s.start(replicaName(seed, 1))
		s.settle(true, time.Minute)
		s.maxFree = 0
		s.start(replicaName(seed, 2))
		took := s.settle(true, 2*time.Minute)
		s.steady(30 * time.Second)
		// The others let go of units once the newcomer takes them, not before: none waits.
		if s.maxFree > 2*tick {
			t.Errorf("seed %d: a unit handed back to a replica that joined waited %s to be taken, want within %s", seed, s.maxFree, 2*tick)
		}
		t.Logf("seed %d: a third replica joined: settled, spread, in %s; units handed back were taken within %s", seed, took, s.maxFree)
	}
}

func TestFailoverAndRejoin(t *testing.T) {
	for _, units := range [][]string{twelveUnits(), sixteenUnits()} {
		rejoins := 0
		for seed := range uint64(3) {
			s := newSim(t, seed, units)
			names := []string{replicaName(seed, 0), replicaName(seed, 1), replicaName(seed, 2)}
			for _, n := range names {
				s.start(n)
			}
			s.settle(true, time.Minute)
			for round := range 5 {
				victim := names[round%3]
				if round%2 == 0 {
					s.kill(victim)
				} else {
					s.stop(victim)
				}
				took := s.settle(true, 2*time.Minute)
				if round%2 == 0 && took > leaseDuration+2*retryPeriod {
					t.Errorf("seed %d: units of a killed replica ran elsewhere after %s, want within %s", seed, took, leaseDuration+2*retryPeriod)
				}
				names[round%3] = replicaName(seed, 10*(round+1)+round%3)
				s.start(names[round%3])
				s.settle(true, 3*time.Minute)
				s.steady(30 * time.Second)
				rejoins++
			}
		}
		t.Logf("%d units: %d rejoins, each spread again, no unit with two owners", len(units), rejoins)
	}
}

// sixteenUnits: two plugins of 3 shards and 10 plugins not split (6, 5 and 5 on 3 replicas).
func sixteenUnits() []string {
	units := twelveUnits()
	for i := 6; i < 10; i++ {
		units = append(units, fmt.Sprintf("plugin-%d", i))
	}
	return units
}

// A replica paused past its deadline (a stopped container, a long GC pause) finds its units
// taken; it stops them at its deadline and never acts beside their new holders.
func TestPausedReplica(t *testing.T) {
	for seed := range uint64(3) {
		s := newSim(t, seed, twelveUnits())
		names := []string{replicaName(seed, 0), replicaName(seed, 1), replicaName(seed, 2)}
		for _, n := range names {
			s.start(n)
		}
		s.settle(true, time.Minute)
		s.replicas[names[1]].paused = true
		for range int(30 * time.Second / tick) {
			s.step()
		}
		if got := s.held()[names[1]]; len(got) == 0 {
			t.Fatalf("seed %d: the paused replica holds nothing in its own view: the test paused nothing", seed)
		}
		s.replicas[names[1]].paused = false
		s.settle(true, 2*time.Minute)
		s.steady(30 * time.Second)
	}
}

// The floor: 10 units on 3 replicas end 4, 3 and 3, never 4, 4 and 2.
func TestFloor(t *testing.T) {
	for seed := range uint64(3) {
		units := twelveUnits()[:10]
		s := newSim(t, seed, units)
		s.start(replicaName(seed, 0))
		s.start(replicaName(seed, 1))
		s.settle(false, time.Minute)
		s.start(replicaName(seed, 2))
		s.settle(false, 2*time.Minute)
		var counts []int
		for _, h := range s.held() {
			counts = append(counts, len(h))
		}
		slices.Sort(counts)
		if !slices.Equal(counts, []int{3, 3, 4}) {
			t.Fatalf("seed %d: held %v, want 3, 3 and 4", seed, counts)
		}
		s.steady(30 * time.Second)
	}
}

// Many shards on few replicas, and plugins added and removed are outside this table; this one
// checks a plugin of 8 shards and 4 plugins not split on 4 replicas, a replica lost and back.
func TestManyShards(t *testing.T) {
	var units []string
	for i := range 8 {
		units = append(units, shard.Unit("wide", i))
	}
	units = append(units, "a", "b", "c", "d")
	for seed := range uint64(3) {
		s := newSim(t, seed, units)
		names := []string{replicaName(seed, 0), replicaName(seed, 1), replicaName(seed, 2), replicaName(seed, 3)}
		for _, n := range names {
			s.start(n)
		}
		s.settle(true, time.Minute)
		s.kill(names[2])
		s.settle(true, 2*time.Minute)
		s.start(replicaName(seed, 9))
		s.settle(true, 3*time.Minute)
		s.steady(30 * time.Second)
	}
}

// hold puts the group in a state by hand: each replica holds the units listed, renewed now.
func (s *sim) hold(holders map[string][]string) {
	for id, units := range holders {
		r := s.replicas[id]
		r.balanceFrom = s.now
		for _, name := range units {
			s.leases[name] = &simLease{holder: id, since: s.now}
			r.units[name].held, r.units[name].renewed = true, s.now
		}
	}
}

// The rejoin case: every replica at its share (4 of 12), one holding two shards of a plugin.
// No replica has room, so the shard cannot simply be let go of: the replica offers it to one
// at its share that holds none of the plugin, which takes it and gives a unit back.
func TestSpreadBetweenReplicasAtTheirShare(t *testing.T) {
	for seed := range uint64(3) {
		s := newSim(t, seed, twelveUnits())
		for _, id := range []string{"a", "b", "c"} {
			s.start(id)
		}
		s.hold(map[string][]string{
			"a": {"alpha/0", "alpha/1", "beta/0", "plugin-0"},
			"b": {"alpha/2", "beta/1", "plugin-1", "plugin-2"},
			"c": {"beta/2", "plugin-3", "plugin-4", "plugin-5"},
		})
		v := s.view(s.replicas["a"])
		v.Now = v.Now.Add(retryPeriod)
		d := Decide(v)
		if len(d.Release) != 1 || d.Release[0].Reason != Exchange || d.Release[0].To != "c" || group(d.Release[0].Unit) != "alpha" {
			t.Fatalf("a holding alpha/0 and alpha/1 at its share decides %+v; want to offer one of them to c", d)
		}
		moves := s.moves
		took := s.settle(true, time.Minute)
		if s.moves-moves != 2 {
			t.Errorf("seed %d: spreading took %d moves, want 2 (one shard to c, one unit back)\n%s", seed, s.moves-moves, s.history())
		}
		s.steady(30 * time.Second)
		if seed == 0 {
			t.Logf("spread again in %s with 2 moves: %v", took, s.held())
		}
	}
}

// The same with 16 units, 6, 5 and 5: the replica at 6 is the only one holding none of alpha's
// shards, and it is at its share.
func TestSpreadToTheReplicaAtItsShare(t *testing.T) {
	s := newSim(t, 1, sixteenUnits())
	for _, id := range []string{"a", "b", "c"} {
		s.start(id)
	}
	s.hold(map[string][]string{
		"a": {"beta/0", "plugin-0", "plugin-1", "plugin-2", "plugin-3", "plugin-4"},
		"b": {"alpha/2", "beta/1", "plugin-5", "plugin-6", "plugin-7"},
		"c": {"alpha/0", "alpha/1", "beta/2", "plugin-8", "plugin-9"},
	})
	moves := s.moves
	s.settle(true, time.Minute)
	if s.moves-moves != 2 {
		t.Errorf("spreading took %d moves, want 2\n%s", s.moves-moves, s.history())
	}
	s.steady(30 * time.Second)
}

// The floor's rule (the replica holding most lets one go while another is below the share
// rounded down) is for units that do not divide evenly. When they do, a view that counts a
// Lease the replicas no longer claim (a plugin being removed) must not make the replica at its
// share let a unit go: the one below the floor takes the free unit instead.
func TestNoFloorReleaseWhenUnitsDivideEvenly(t *testing.T) {
	units := twelveUnits()
	v := View{Self: "a", Replicas: []string{"a", "b", "c"}, Leases: map[string]Lease{}, Now: time.Unix(1000, 0),
		RetryPeriod: retryPeriod, SpreadBackoff: 10 * leaseDuration}
	holders := map[string][]string{ // plugin-5 is free
		"a": {"alpha/0", "beta/0", "plugin-0", "plugin-1"},
		"b": {"alpha/1", "beta/1", "plugin-2", "plugin-3"},
		"c": {"alpha/2", "beta/2", "plugin-4"},
	}
	for id, held := range holders {
		for _, u := range held {
			v.Leases[u] = Lease{Holder: id}
		}
	}
	v.Leases["removed-plugin"] = Lease{Holder: "a"} // a unit no longer claimed, its Lease not collected yet
	for _, u := range units {
		v.Units = append(v.Units, Unit{Name: u, Held: slices.Contains(holders["a"], u)})
	}
	if d := Decide(v); len(d.Release) > 0 {
		t.Fatalf("a at its share of 12 units on 3 replicas lets go of %+v; want nothing (c takes the free unit)", d.Release)
	}
}

func TestRankSpreadsShards(t *testing.T) {
	replicas := []string{"a", "b", "c"}
	firsts := map[string]bool{}
	for i := range 3 {
		firsts[Rank(replicas, shard.Unit("p", i))[0]] = true
	}
	if len(firsts) != 3 {
		t.Fatalf("the 3 shards of a plugin are first preferred by %d replicas, want 3", len(firsts))
	}
}
