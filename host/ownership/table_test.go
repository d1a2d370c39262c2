package ownership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests run replicas as Tables on one fake clientset, with the settings a user gets (Leases
// of 15 s, a renew deadline of 10 s, renewals every 2 s), on fake clocks they step. After each
// step a test waits until every replica has done what the step made due (settle), so that each
// replica acts, and sees the others' writes, at the time of the step: the times a test checks
// are exact.
const (
	namespace     = "wasmrec-system"
	group         = "wasmrec"
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	// step is how far a test moves a clock at once: less than the deadline watch's period
	// (retryPeriod / 4), so that no deadline is passed by more than one tick.
	step = 250 * time.Millisecond
	// handBackPoll is how often a stopping table looks, on its clock, whether its runs have
	// returned.
	handBackPoll = 50 * time.Millisecond
)

// The tests that check when a Lease expires step from a millisecond before its expiry to a
// millisecond after, never onto the very instant: a round then would find the Lease neither
// expired (expired is strictly after) nor still to expire (nextExpiry is strictly after now),
// and sleep until the next renewal.

var (
	epoch     = time.Unix(1_000_000, 0)
	leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")
	errCut    = errors.New("dial tcp: connect: connection refused")
)

// fakeClock is client-go's fake clock, that also counts its tickers and tells whether a tick
// is unread. The fake's tickers stay on their clock when stopped: Waiters counts every one ever
// made. The table's deadline watch runs on a ticker, and a tick sent while the last one is
// unread is dropped, so a test steps the clock again only once each tick has been read.
type fakeClock struct {
	*clocktesting.FakeClock
	mu      sync.Mutex
	made    int                  // tickers made
	running map[*fakeTicker]bool // tickers not stopped
}

var _ clock.WithTicker = (*fakeClock)(nil)

func newClock(at time.Time) *fakeClock {
	return &fakeClock{FakeClock: clocktesting.NewFakeClock(at), running: map[*fakeTicker]bool{}}
}

type fakeTicker struct {
	clock.Ticker
	c *fakeClock
}

func (c *fakeClock) NewTicker(d time.Duration) clock.Ticker {
	t := &fakeTicker{Ticker: c.FakeClock.NewTicker(d), c: c}
	c.mu.Lock()
	c.made++
	c.running[t] = true
	c.mu.Unlock()
	return t
}

func (t *fakeTicker) Stop() {
	t.Ticker.Stop()
	t.c.mu.Lock()
	delete(t.c.running, t)
	t.c.mu.Unlock()
}

func (c *fakeClock) tickersMade() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.made
}

func (c *fakeClock) tickUnread() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range c.running {
		if len(t.C()) > 0 {
			return true
		}
	}
	return false
}

// cluster is the API server's Leases, shared by the replicas of one group, and what the
// replicas' runs hold.
type cluster struct {
	t  *testing.T
	cs *fake.Clientset

	mu       sync.Mutex
	replicas []*replica                 // running, in the order they started
	running  map[string]map[string]bool // by unit: the replicas whose run holds it
	paused   map[string]bool            // replicas whose process stands still
	cut      map[string]bool            // replicas, and replica Leases, whose writes fail
}

// replica is one host: a Table, and one Claim of every unit with its run going.
type replica struct {
	id      string
	clock   *fakeClock
	table   *Table
	claim   *Claim
	cancel  context.CancelFunc
	started chan error // Start's return
	ran     chan error // Run's return
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, cs: fake.NewClientset(), running: map[string]map[string]bool{}, paused: map[string]bool{}, cut: map[string]bool{}}
	c.serveLeases()
	t.Cleanup(func() {
		c.mu.Lock()
		rs := slices.Clone(c.replicas)
		c.mu.Unlock()
		for _, r := range rs {
			c.resume(r)
		}
		for _, r := range slices.Backward(rs) {
			c.stop(r)
		}
	})
	return c
}

// serveLeases makes the fake clientset's Lease writes what the API server's are: each write
// gives the Lease a new resourceVersion, and an update of a version other than the stored one
// is a conflict. The fake's tracker keeps no versions: every update would win, and a replica
// would not see the others' renewals, which the table tells apart by version. A write by a
// replica cut off from the API server fails: a Lease it would hold, or one it holds handed
// back, or its replica Lease deleted.
func (c *cluster) serveLeases() {
	tracker := c.cs.Tracker()
	var version int64 // the fake calls one reactor at a time
	next := func(l *coordinationv1.Lease) {
		version++
		l.ResourceVersion = strconv.FormatInt(version, 10)
	}
	c.cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		if c.isCut(holder(l)) {
			return true, nil, errCut
		}
		next(l)
		if err := tracker.Create(leasesGVR, l, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	c.cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := tracker.Get(leasesGVR, a.GetNamespace(), l.Name)
		if err != nil {
			return true, nil, err
		}
		was := cur.(*coordinationv1.Lease)
		if c.isCut(holder(l)) || (holder(l) == "" && c.isCut(holder(was))) {
			return true, nil, errCut
		}
		if l.ResourceVersion != was.ResourceVersion {
			return true, nil, apierrors.NewConflict(leasesGVR.GroupResource(), l.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		next(l)
		if err := tracker.Update(leasesGVR, l, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	c.cs.PrependReactor("delete", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if c.isCut(a.(k8stesting.DeleteAction).GetName()) {
			return true, nil, errCut
		}
		return false, nil, nil
	})
}

func (c *cluster) isCut(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut[name]
}

// cutOff fails every Lease write of r from now on, as a replica whose writes no longer reach
// the API server; its reads and its watch go on.
func (c *cluster) cutOff(r *replica) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut[r.id], c.cut[r.table.replicaLease()] = true, true
}

// start starts replica id on clk, claiming units, and waits until it has settled: it has listed
// the Leases, renewed its replica Lease, and the others have seen it.
func (c *cluster) start(id string, clk *fakeClock, units ...string) *replica {
	c.t.Helper()
	table, err := New(c.cs, Options{
		Namespace: namespace, Group: group, Identity: id,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Logger: testr.New(c.t).WithName(id), Clock: clk,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	claim, err := table.Claim(units...)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{id: id, clock: clk, table: table, claim: claim, cancel: cancel, started: make(chan error, 1), ran: make(chan error, 1)}
	go func() { r.started <- table.Start(ctx) }()
	go func() { r.ran <- claim.Run(ctx, c.run(id)) }()
	c.mu.Lock()
	c.replicas = append(c.replicas, r)
	c.mu.Unlock()
	c.settle()
	// A table counts the replicas in a round it runs when woken, which settle cannot tell from
	// one about to run: wait for the others to count this one, at this time.
	for _, o := range c.live() {
		waitFor(c.t, o.id+" to see "+id, func() bool { return slices.Contains(o.table.Replicas(), id) })
	}
	return r
}

// live are the running replicas not paused.
func (c *cluster) live() []*replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*replica
	for _, r := range c.replicas {
		if !c.paused[r.id] {
			out = append(out, r)
		}
	}
	return out
}

// run is replica id's run of the units it holds: it holds them until cancelled, and returns at
// once. A unit whose run starts while another replica's run holds it runs twice: the test fails,
// unless that replica is paused (its run does not run).
func (c *cluster) run(id string) func(context.Context, []string) error {
	return func(ctx context.Context, held []string) error {
		c.mu.Lock()
		for _, u := range held {
			if c.running[u] == nil {
				c.running[u] = map[string]bool{}
			}
			for other := range c.running[u] {
				if !c.paused[other] {
					c.t.Errorf("unit %s runs on %s and %s at once", u, other, id)
				}
			}
			c.running[u][id] = true
		}
		c.mu.Unlock()
		<-ctx.Done()
		c.mu.Lock()
		for _, u := range held {
			delete(c.running[u], id)
		}
		c.mu.Unlock()
		return nil
	}
}

// runners are the replicas whose run holds unit, sorted.
func (c *cluster) runners(unit string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id := range c.running[unit] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// pause stands r's process still, as a stopped container or a suspended VM: its table's
// goroutines (its loop, its deadline watch, its informer's handlers, its claim's Run) stop at
// the table's lock, which pause holds until resume. Its clock is its own, and the test stops
// stepping it. Only what takes no lock, as Fresh, can be asked of it meanwhile.
func (c *cluster) pause(r *replica) {
	r.table.mu.Lock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused[r.id] = true
}

func (c *cluster) resume(r *replica) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused[r.id] {
		c.paused[r.id] = false
		r.table.mu.Unlock()
	}
}

// stop stops r as its host would: its table and its runs are cancelled together. The table
// waits for the runs to return, looking every 50 ms on its clock, which stop steps while the
// others are settled.
func (c *cluster) stop(r *replica) {
	c.t.Helper()
	c.mu.Lock()
	c.replicas = slices.DeleteFunc(c.replicas, func(o *replica) bool { return o == r })
	c.mu.Unlock()
	r.cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-r.started:
			if err != nil {
				c.t.Errorf("%s: Start: %v", r.id, err)
			}
			if err := <-r.ran; err != nil {
				c.t.Errorf("%s: Run: %v", r.id, err)
			}
			c.settle()
			return
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after 10 s: %s has not stopped", r.id)
		}
		if c.unsettled(r.clock) == "" {
			r.clock.Step(handBackPoll)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// settle waits until every running replica has done what is due at its clock's time.
func (c *cluster) settle() {
	c.t.Helper()
	var why string
	waitFor(c.t, "the replicas to settle", func() bool {
		why = c.unsettled(nil)
		return why == ""
	}, func() string { return why })
}

// unsettled says what a running replica, not paused, has still to do at its clock's time; ""
// when none has anything: its table waits on its timer with no wake-up pending, every tick of
// its deadline watch has been read, it has seen every Lease as the API server holds it, its
// claim's run holds what the table holds, and nothing let go of waits to be handed back.
// stopping, if not nil, is the clock of a replica stopping, which waits on it once more.
// A table just woken by a wake-up (a Lease seen to change hands, a run returned) that has not
// yet stopped its timer looks asleep: what a test needs of such a round, it waits for.
func (c *cluster) unsettled(stopping *fakeClock) string {
	replicas := c.live()
	// On each clock: every ticker made, a timer for each table, and the stopping table's.
	waiters := map[*fakeClock]int{}
	if stopping != nil {
		waiters[stopping] = 1
	}
	for _, r := range replicas {
		waiters[r.clock]++
	}
	for clk := range waiters {
		waiters[clk] += clk.tickersMade()
	}
	waiting := func() string {
		for clk, n := range waiters {
			if got := clk.Waiters(); got != n {
				return fmt.Sprintf("%d timers on a clock, want %d", got, n)
			}
			if clk.tickUnread() {
				return "a tick unread"
			}
		}
		return ""
	}
	// A table that woke up and went back to sleep between two looks might have written a
	// Lease: the Leases are read between two looks at the timers, and again after.
	if why := waiting(); why != "" {
		return why
	}
	leases := c.versions()
	for _, r := range replicas {
		if why := r.unsettled(leases); why != "" {
			return r.id + ": " + why
		}
	}
	if why := waiting(); why != "" {
		return why
	}
	if !maps.Equal(leases, c.versions()) {
		return "a Lease changed"
	}
	return ""
}

// versions are the resourceVersions of the Leases the API server holds, by name.
func (c *cluster) versions() map[string]string {
	list, err := c.cs.Tracker().List(leasesGVR, coordinationv1.SchemeGroupVersion.WithKind("Lease"), namespace)
	if err != nil {
		c.t.Error(err)
		return nil
	}
	out := map[string]string{}
	for _, l := range list.(*coordinationv1.LeaseList).Items {
		out[l.Name] = l.ResourceVersion
	}
	return out
}

func (r *replica) unsettled(leases map[string]string) string {
	t := r.table
	if len(t.wake) > 0 {
		return "a wake-up pending"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, v := range leases {
		if s, ok := t.seen[name]; !ok || s.version != v {
			return "has not seen Lease " + name + " at version " + v
		}
	}
	for name := range t.seen {
		if _, ok := leases[name]; !ok {
			return "has not seen Lease " + name + " deleted"
		}
	}
	if held := r.claim.stateLocked().Held; !slices.Equal(r.claim.running, held) {
		return fmt.Sprintf("its run holds %v, not %v", r.claim.running, held)
	}
	for _, u := range append(t.sortedUnits(), t.closing...) {
		if u.releasing && !u.claim.runs(u.name) {
			return "unit " + u.name + " waits to be handed back"
		}
	}
	return ""
}

// advance steps clocks (that read the same time) to until, a step at a time, and settles after
// each step; then it calls check, if not nil, with the time.
func (c *cluster) advance(until time.Time, check func(now time.Time), clocks ...*fakeClock) {
	c.t.Helper()
	c.settle()
	for now := clocks[0].Now(); now.Before(until); now = clocks[0].Now() {
		for _, clk := range clocks {
			clk.Step(min(step, until.Sub(now)))
		}
		c.settle()
		if check != nil {
			check(clocks[0].Now())
		}
	}
}

// lease is the Lease named name as the API server holds it; nil if there is none.
func (c *cluster) lease(name string) *coordinationv1.Lease {
	obj, err := c.cs.Tracker().Get(leasesGVR, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return obj.(*coordinationv1.Lease)
}

// renewed is when r last renewed its Leases: the latest renew time they carry.
func (c *cluster) renewed(r *replica) time.Time {
	c.t.Helper()
	list, err := c.cs.CoordinationV1().Leases(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var last time.Time
	for _, l := range list.Items {
		if holder(&l) == r.id && l.Spec.RenewTime.After(last) {
			last = l.Spec.RenewTime.Time
		}
	}
	if last.IsZero() {
		c.t.Fatalf("%s holds no Lease", r.id)
	}
	return last
}

// held are the units r holds now.
func (r *replica) held() []string {
	s, _ := r.claim.State()
	return s.Held
}

// waitFor waits until cond holds, for at most 10 s; then why, if given, says what it waits for.
func waitFor(t *testing.T, what string, cond func() bool, why ...func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, w := range why {
				what += ": " + w()
			}
			t.Fatalf("after 10 s: waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

var fourUnits = []string{"alpha", "beta", "gamma", "delta"}

// twoReplicas starts replica a on a fresh clock, lets it take every unit, then starts replica
// b and lets a retry period pass: they share the units, a holding the larger half.
func twoReplicas(t *testing.T, units ...string) (c *cluster, clk *fakeClock, a, b *replica) {
	t.Helper()
	c, clk = newCluster(t), newClock(epoch)
	a = c.start("a", clk, units...)
	c.advance(clk.Now().Add(retryPeriod+step), nil, clk)
	waitFor(t, "a to take every unit", func() bool { return len(a.held()) == len(units) })
	b = c.start("b", clk, units...)
	c.advance(clk.Now().Add(retryPeriod+step), nil, clk)
	share := (len(units) + 1) / 2
	waitFor(t, "a and b to share the units", func() bool { return len(a.held()) == share && len(b.held()) == len(units)-share })
	c.settle()
	return c, clk, a, b
}

// A replica takes units a retry period after it starts, so that replicas started together see
// each other first. A replica that joins takes its share once it has been seen for a retry
// period: until then every unit keeps running where it is; then the other lets go of what is
// over its share, hands it back once its run has returned, and the newcomer takes it. Each
// stands by for the units the other holds, and the split holds while both renew.
func TestAReplicaThatJoinsTakesItsShareOnceSeenForARetryPeriod(t *testing.T) {
	c, clk := newCluster(t), newClock(epoch)
	a := c.start("a", clk, fourUnits...)
	started := clk.Now()
	c.advance(started.Add(retryPeriod), func(now time.Time) {
		if h := a.held(); now.Before(started.Add(retryPeriod)) && len(h) > 0 {
			t.Fatalf("a holds %v %s after it started, before a retry period", h, now.Sub(started))
		}
	}, clk)
	c.advance(clk.Now().Add(step), nil, clk)
	waitFor(t, "a to take every unit", func() bool { return len(a.held()) == 4 })

	b := c.start("b", clk, fourUnits...)
	joined := clk.Now()
	c.advance(joined.Add(retryPeriod), func(now time.Time) {
		if ah, bh := a.held(), b.held(); now.Before(joined.Add(retryPeriod)) && (len(ah) != 4 || len(bh) != 0) {
			t.Fatalf("%s after b joined, a holds %v and b %v: every unit should stay on a for a retry period", now.Sub(joined), ah, bh)
		}
	}, clk)
	c.advance(clk.Now().Add(step), nil, clk)
	waitFor(t, "a and b to hold two units each", func() bool { return len(a.held()) == 2 && len(b.held()) == 2 })
	c.settle()
	for _, r := range []*replica{a, b} {
		if got := r.table.Replicas(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s sees the replicas %v, want [a b]", r.id, got)
		}
	}
	ah, bh := a.held(), b.held()
	for _, u := range ah {
		if got := c.runners(u); !slices.Equal(got, []string{"a"}) {
			t.Errorf("unit %s, held by a, is run by %v", u, got)
		}
	}
	// Standby is marked in a round run when a change is seen: wait for it.
	var standby [2][]string
	waitFor(t, "each replica to stand by for the other's units", func() bool {
		as, _ := a.claim.State()
		bs, _ := b.claim.State()
		standby = [2][]string{as.Standby, bs.Standby}
		return slices.Equal(as.Standby, bh) && slices.Equal(bs.Standby, ah)
	}, func() string {
		return fmt.Sprintf("a stands by for %v and b for %v; a holds %v, b %v", standby[0], standby[1], ah, bh)
	})
	c.advance(clk.Now().Add(leaseDuration), func(now time.Time) {
		if got := a.held(); !slices.Equal(got, ah) {
			t.Fatalf("%s after the split, a holds %v, not %v", now.Sub(joined), got, ah)
		}
		if got := b.held(); !slices.Equal(got, bh) {
			t.Fatalf("%s after the split, b holds %v, not %v", now.Sub(joined), got, bh)
		}
	}, clk)
}

// A replica that stops hands back the units it holds, once their runs have returned, and
// deletes its replica Lease: the other takes them over at once, not when they would expire.
func TestAReplicaThatLeavesHandsItsUnitsBackAndTheOtherTakesThemOverAtOnce(t *testing.T) {
	c, clk, a, b := twoReplicas(t, fourUnits...)
	leaving := clk.Now()
	c.stop(b)
	// From here the clock stands still.
	waitFor(t, "a to take over b's units", func() bool { return len(a.held()) == 4 })
	if d := clk.Since(leaving); d > 10*handBackPoll {
		t.Errorf("the clock moved %s while b stopped: only the polls of its hand-back should move it", d)
	}
	c.settle()
	if got := a.table.Replicas(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a sees the replicas %v, want [a]", got)
	}
	if l := c.lease(b.table.replicaLease()); l != nil {
		t.Errorf("b's replica Lease is still there: %+v", l.Spec)
	}
	for _, u := range fourUnits {
		if h := holder(c.lease(a.table.leaseName(u))); h != "a" {
			t.Errorf("unit %s's Lease is held by %q, want a", u, h)
		}
	}
}

// A replica that stops renewing (it died, its Lease writes fail) hands nothing back: the other
// takes its units over one lease duration after it last renewed, and not a moment before, for
// it counts a Lease's expiry from when it saw the Lease change.
func TestAReplicaThatStopsRenewingLosesItsUnitsOnlyAfterTheLeaseDuration(t *testing.T) {
	c, clk, a, b := twoReplicas(t, fourUnits...)
	c.cutOff(a)
	c.stop(a)
	renewed := c.renewed(a)
	expires := renewed.Add(leaseDuration)
	bh := b.held()
	c.advance(expires.Add(-time.Millisecond), func(now time.Time) {
		if got := b.held(); !slices.Equal(got, bh) {
			t.Fatalf("%s after a last renewed, b holds %v: it took a's units before their Leases expired", now.Sub(renewed), got)
		}
		if got := b.table.Replicas(); now.Before(expires) && !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("%s after a last renewed, b sees the replicas %v, want [a b]: a's replica Lease has not expired", now.Sub(renewed), got)
		}
	}, clk)
	c.advance(expires.Add(time.Millisecond), nil, clk)
	waitFor(t, "b to take a's units once their Leases expired", func() bool { return len(b.held()) == 4 })
	c.settle()
	if got := b.table.Replicas(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("b sees the replicas %v, want [b]", got)
	}
}

// A replica that cannot renew (it lost its way to the API server, but runs on) stops acting for
// a unit at its renew deadline (Fresh turns false) and stops its run at the next tick of its
// deadline watch; the other replica takes the unit only at the lease duration, after that run
// has returned.
func TestAReplicaThatCannotRenewStopsItsUnitAtTheRenewDeadlineBeforeAnotherMayTakeIt(t *testing.T) {
	c, clk, a, b := twoReplicas(t, "solo")
	c.cutOff(a)
	renewed := c.lease(a.table.leaseName("solo")).Spec.RenewTime.Time
	deadline, expires := renewed.Add(renewDeadline), renewed.Add(leaseDuration)
	if !clk.Now().Before(deadline) {
		t.Fatalf("a renewed %s ago, past its deadline already", clk.Since(renewed))
	}
	c.advance(expires.Add(-time.Millisecond), func(now time.Time) {
		since := now.Sub(renewed)
		switch {
		case now.Before(deadline):
			if !a.claim.Fresh() {
				t.Fatalf("%s after a last renewed, before its renew deadline, its claim is not fresh", since)
			}
			if got := c.runners("solo"); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("%s after a last renewed, before its renew deadline, solo is run by %v, want [a]", since, got)
			}
		default:
			if a.claim.Fresh() {
				t.Fatalf("%s after a last renewed, past its renew deadline, its claim is still fresh", since)
			}
			if !now.Before(deadline.Add(retryPeriod/4 + step)) {
				waitFor(t, fmt.Sprintf("a's run to return, %s after it last renewed", since), func() bool { return len(c.runners("solo")) == 0 })
			}
		}
		if got := b.held(); len(got) > 0 {
			t.Fatalf("%s after a last renewed, b holds %v before a's Lease expired", since, got)
		}
	}, clk)
	c.advance(expires.Add(time.Millisecond), nil, clk)
	waitFor(t, "b to take solo once a's Lease expired", func() bool {
		return slices.Equal(b.held(), []string{"solo"}) && slices.Equal(c.runners("solo"), []string{"b"})
	})
	if got := a.held(); len(got) > 0 {
		t.Errorf("a, cut off, still holds %v", got)
	}
}

// A replica paused past its renew deadline (a stopped container, a suspended VM) may run again
// before its deadline watch fires: Fresh is false from the moment its clock reads past the
// deadline, before any of its goroutines has run, so its run does not act for a unit another
// replica took meanwhile; then it lets the unit go, and does not take it back. The other takes
// the unit one lease duration after it last saw its Lease change, by its own clock.
func TestAPausedReplicaIsNotFreshOnceItsClockPassesItsRenewDeadline(t *testing.T) {
	c, clkA := newCluster(t), newClock(epoch)
	a := c.start("a", clkA, "solo")
	c.advance(clkA.Now().Add(retryPeriod+step), nil, clkA)
	waitFor(t, "a to take solo", func() bool { return slices.Equal(a.held(), []string{"solo"}) })
	c.settle()
	renewed := c.lease(a.table.leaseName("solo")).Spec.RenewTime.Time

	// b starts on a clock of its own; then a pauses, and its clock stands still while b's runs.
	clkB := newClock(clkA.Now())
	b := c.start("b", clkB, "solo")
	seen := clkB.Now()
	c.pause(a)
	c.advance(seen.Add(leaseDuration-time.Millisecond), func(now time.Time) {
		if got := b.held(); len(got) > 0 {
			t.Fatalf("%s after b first saw solo's Lease, b holds %v before it expired", now.Sub(seen), got)
		}
	}, clkB)
	c.advance(seen.Add(leaseDuration+time.Millisecond), nil, clkB)
	// a's run, standing still, holds solo still: it may not act, and Fresh says so once a runs.
	waitFor(t, "b to take solo and run it once a's Lease expired", func() bool {
		return slices.Equal(b.held(), []string{"solo"}) && slices.Equal(c.runners("solo"), []string{"a", "b"})
	})
	if !a.claim.Fresh() {
		t.Fatal("a's claim is not fresh while its clock stands still before its renew deadline")
	}

	// a's clock catches up, and a's run asks Fresh before anything else of a's has run.
	clkA.SetTime(clkB.Now())
	if a.claim.Fresh() {
		t.Fatalf("a resumed %s after it last renewed, past its renew deadline, and its claim is still fresh", clkA.Since(renewed))
	}
	c.resume(a)
	waitFor(t, "a to let solo go", func() bool { return len(a.held()) == 0 && slices.Equal(c.runners("solo"), []string{"b"}) })
	c.advance(clkA.Now().Add(leaseDuration+retryPeriod), func(time.Time) {
		if a.claim.Fresh() || len(a.held()) > 0 {
			t.Fatalf("a holds %v again though b holds solo", a.held())
		}
	}, clkB, clkA)
	if h := holder(c.lease(a.table.leaseName("solo"))); h != "b" {
		t.Errorf("solo's Lease is held by %q, want b", h)
	}
}

// goneReplica leaves Leases as a replica c killed long ago would: its replica Lease, and the
// Leases of units alpha and gone, last renewed eleven lease durations before the epoch.
func goneReplica(t *testing.T, c *cluster) (replicaLease string) {
	t.Helper()
	gone := &Table{opts: Options{Namespace: namespace, Group: group, Identity: "c", LeaseDuration: leaseDuration}}
	at := epoch.Add(-11 * leaseDuration)
	for _, l := range []*coordinationv1.Lease{
		gone.newLease(gone.replicaLease(), RoleReplica, "", at),
		gone.newLease(gone.leaseName("alpha"), RoleUnit, "alpha", at),
		gone.newLease(gone.leaseName("gone"), RoleUnit, "gone", at),
	} {
		if _, err := c.cs.CoordinationV1().Leases(namespace).Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return gone.replicaLease()
}

// A replica deletes the Leases not renewed for ten lease durations, of replicas and of units it
// does not claim, at its first renewal; the Lease of a unit it claims it keeps.
func TestLeasesNotRenewedForTenLeaseDurationsAreDeletedUnlessTheirUnitIsClaimed(t *testing.T) {
	c, clk := newCluster(t), newClock(epoch)
	goneLease := goneReplica(t, c)
	a := c.start("a", clk, "alpha")
	for name, want := range map[string]bool{goneLease: false, a.table.leaseName("gone"): false, a.table.leaseName("alpha"): true} {
		if got := c.lease(name) != nil; got != want {
			t.Errorf("Lease %s is there: %t, want %t", name, got, want)
		}
	}
}

// A replica counts a Lease's expiry from when it saw the Lease change, by its own clock, not from
// the renew time the Lease carries (the clocks of replicas are not compared): a unit Lease left
// by a replica long gone is taken one lease duration after it was first seen.
func TestALeaseExpiresOneLeaseDurationAfterItWasSeenWhateverItsRenewTime(t *testing.T) {
	c, clk := newCluster(t), newClock(epoch)
	goneReplica(t, c)
	a := c.start("a", clk, "alpha")
	seen := clk.Now()
	c.advance(seen.Add(leaseDuration-time.Millisecond), func(now time.Time) {
		if got := a.held(); len(got) > 0 {
			t.Fatalf("%s after a first saw alpha's Lease, a holds %v", now.Sub(seen), got)
		}
	}, clk)
	c.advance(seen.Add(leaseDuration+time.Millisecond), nil, clk)
	waitFor(t, "a to take alpha", func() bool { return slices.Equal(a.held(), []string{"alpha"}) })
}

// SharingReplicas lists the holders of the group's replica Leases renewed within their own
// lease duration, by this process's clock.
func TestSharingReplicasListsTheReplicasRenewedWithinTheirLeaseDuration(t *testing.T) {
	cs := fake.NewClientset()
	now := time.Now()
	lease := func(grp, role, identity string, renewed time.Time, secs int32) {
		t.Helper()
		r := &Table{opts: Options{Namespace: namespace, Group: grp, Identity: identity, LeaseDuration: time.Duration(secs) * time.Second}}
		l := r.newLease(r.replicaLease(), role, "", renewed)
		if role == RoleUnit {
			l.Name = r.leaseName(identity)
		}
		if _, err := cs.CoordinationV1().Leases(namespace).Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lease(group, RoleReplica, "live", now, 15)
	lease(group, RoleReplica, "stale", now.Add(-20*time.Second), 15)
	lease(group, RoleReplica, "patient", now.Add(-20*time.Second), 30)
	lease(group, RoleReplica, "", now, 15)
	lease(group, RoleUnit, "unit", now, 15)
	lease("other", RoleReplica, "elsewhere", now, 15)
	got, err := SharingReplicas(context.Background(), cs, namespace, group)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"live", "patient"}; !slices.Equal(got, want) {
		t.Errorf("SharingReplicas = %v, want %v", got, want)
	}
}
