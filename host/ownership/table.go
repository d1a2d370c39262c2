package ownership

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/ownership/internal/placement"
)

// Labels on the Leases of a group.
const (
	// GroupLabel names the group a Lease belongs to.
	GroupLabel = "wasmrec.dev/lease-group"
	// RoleLabel is RoleReplica or RoleUnit.
	RoleLabel   = "wasmrec.dev/lease-role"
	RoleReplica = "replica"
	RoleUnit    = "unit"
	// UnitAnnotation is the unit a unit Lease is for, as Claim names it.
	UnitAnnotation = "wasmrec.dev/unit"
	// OfferedToAnnotation, on a unit Lease handed back, names the replica it was offered to,
	// to spread a plugin's shards: that replica may take it while at its share.
	OfferedToAnnotation = "wasmrec.dev/offered-to"
)

// Options configure a Table.
type Options struct {
	// Namespace of the Leases. Required.
	Namespace string
	// Group names the replicas sharing units: the prefix of every Lease name and the value of
	// GroupLabel. Required.
	Group string
	// Identity of this replica. Required, and unique to this process.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are as client-go's leader election has them
	// (15 s, 10 s, 2 s by default). RenewDeadline must be below LeaseDuration.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger defaults to logr.Discard().
	Logger logr.Logger
	// Clock is what the table reads the time from and sets its timers on, as workqueue's
	// Clock. It defaults to the real clock.
	Clock clock.WithTicker
}

// Defaults: the host's leader election's, so both modes fail over alike.
const (
	DefaultLeaseDuration = manager.DefaultLeaseDuration
	DefaultRenewDeadline = manager.DefaultRenewDeadline
	DefaultRetryPeriod   = manager.DefaultRetryPeriod
)

// Table holds this replica's view of the group's Leases and the units it holds. It is a
// manager runnable: it runs on every replica.
type Table struct {
	opts   Options
	clock  clock.WithTicker // every read of time and every timer goes through it: opts.Clock
	cs     kubernetes.Interface
	leases coordinationclient.LeaseInterface
	log    logr.Logger
	wake   chan struct{}

	mu          sync.Mutex
	units       map[string]*unit     // by unit name
	seen        map[string]seen      // by Lease name: what was last seen there, and when
	replicas    []string             // identities of the live replicas, this one included
	closing     []*unit              // units of closed claims, until handed back
	deferred    time.Time            // when a unit left to another replica may be taken; zero: none
	leaderSeen  string               // the holder of a leader Lease of the group's name, last said
	balanceFrom time.Time            // when this replica first takes units
	spreadTried map[string]time.Time // units let go of to spread their group, and when
	lastSpread  time.Time            // when a unit was last let go of to spread its group
	joined      map[string]time.Time // when each live replica was first seen live
	lastError   string               // the last Lease call error said, see leaseError
	// replicasChanged is closed and replaced when replicas changes.
	replicasChanged chan struct{}
	started         bool
}

// unit is one unit's state on this replica.
type unit struct {
	name, lease string
	claim       *Claim
	held        bool      // this replica holds the Lease and may run the unit
	releasing   bool      // let go of: its Lease is handed back once no run holds it
	renewed     time.Time // the last successful renewal
	standby     bool      // this replica would take it over next
	offerTo     string    // the replica its Lease is offered to when handed back, if any
}

// New returns a Table for leases in opts.Namespace, read and written with cs.
func New(cs kubernetes.Interface, opts Options) (*Table, error) {
	if opts.Namespace == "" || opts.Group == "" || opts.Identity == "" {
		return nil, errors.New("ownership: the Leases' namespace, the group and this replica's identity are required")
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewDeadline == 0 {
		opts.RenewDeadline = DefaultRenewDeadline
	}
	if opts.RetryPeriod == 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.RenewDeadline >= opts.LeaseDuration {
		return nil, fmt.Errorf("ownership: the renew deadline (%s) must be below the lease duration (%s), or a replica could run a unit another has taken", opts.RenewDeadline, opts.LeaseDuration)
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Table{
		opts:   opts,
		clock:  opts.Clock,
		cs:     cs,
		leases: cs.CoordinationV1().Leases(opts.Namespace),
		log:    opts.Logger.WithValues("leaseNamespace", opts.Namespace, "replica", opts.Identity),
		wake:   make(chan struct{}, 1),
		units:  map[string]*unit{},
		seen:   map[string]seen{},

		spreadTried: map[string]time.Time{},

		replicasChanged: make(chan struct{}),
	}, nil
}

// Identity is this replica's.
func (t *Table) Identity() string { return t.opts.Identity }

// Replicas are the identities of the live replicas of the group as last seen, sorted.
func (t *Table) Replicas() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.replicas) == 0 {
		return []string{t.opts.Identity}
	}
	return slices.Clone(t.replicas)
}

// ReplicasChanged returns a channel closed when the live replicas change next.
func (t *Table) ReplicasChanged() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.replicasChanged
}

// Reporter reports whether this replica is the one that speaks for the group where one voice
// is enough (the first live replica by identity): Events and shared status fields.
func (t *Table) Reporter() bool { return t.Replicas()[0] == t.opts.Identity }

// NeedLeaderElection is false: every replica takes part.
func (t *Table) NeedLeaderElection() bool { return false }

// Name names the table for the manager.
func (t *Table) Name() string { return "ownership " + t.opts.Namespace + "/" + t.opts.Group }

func (t *Table) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Start keeps this replica's share of the units until ctx is done; then it waits for the runs
// to return (at most one lease duration), hands back what it holds and removes its replica
// Lease, so the others take over at once.
//
// It watches the group's Leases: a Lease's expiry is counted from when a change to it was seen,
// by this replica's clock (replicas' clocks are not compared), and the watch sees a renewal
// as it happens, so a replica that stops renewing is taken over one lease duration after its
// last renewal. Renewals go out every retry period.
func (t *Table) Start(ctx context.Context) error {
	t.mu.Lock()
	if t.started {
		t.mu.Unlock()
		return errors.New("ownership: already started")
	}
	t.started = true
	t.mu.Unlock()
	t.log.Info("sharing plugins with the other replicas", "group", t.opts.Group, "leaseDuration", t.opts.LeaseDuration, "renewDeadline", t.opts.RenewDeadline)
	factory := informers.NewSharedInformerFactoryWithOptions(t.cs, 0, informers.WithNamespace(t.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = GroupLabel + "=" + t.opts.Group }))
	inf := factory.Coordination().V1().Leases().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.saw(obj) },
		UpdateFunc: func(_, obj any) { t.saw(obj) },
		DeleteFunc: func(obj any) { t.gone(obj) },
	}); err != nil {
		return err
	}
	// A replica that cannot read the Leases holds nothing: say why, with what it needs.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		t.log.Error(err, "listing and watching the group's Leases failed; this replica runs no plugin until it can: it needs get, list, watch, create, update and delete on leases (coordination.k8s.io) in its namespace")
	})
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	factory.Start(watchCtx.Done())
	defer func() {
		stopWatch()
		factory.Shutdown() // waits for the informer, which stopWatch stops
	}()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	stopDeadlines := t.watchDeadlines(ctx)
	defer stopDeadlines()
	// Replicas started together see each other before the first takes anything.
	balanceFrom := t.clock.Now().Add(t.opts.RetryPeriod)
	t.mu.Lock()
	t.balanceFrom = balanceFrom
	t.mu.Unlock()
	var nextRenew time.Time
	for {
		now := t.clock.Now()
		if !now.Before(nextRenew) {
			t.renew(ctx, now)
			// Jittered, as client-go's elector, so that replicas started together do not race.
			nextRenew = now.Add(t.opts.RetryPeriod + time.Duration(rand.Int64N(int64(t.opts.RetryPeriod/5)+1)))
		}
		t.round(ctx, !now.Before(balanceFrom))
		wake := nextRenew
		if e := t.nextExpiry(); !e.IsZero() && e.Before(wake) {
			wake = e
		}
		t.mu.Lock()
		if d := t.deferred; !d.IsZero() && d.Before(wake) {
			wake = d
		}
		t.mu.Unlock()
		if now.Before(balanceFrom) && balanceFrom.Before(wake) {
			wake = balanceFrom
		}
		timer := t.clock.NewTimer(wake.Sub(t.clock.Now()) + time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			stopDeadlines()
			t.handBack()
			return nil
		case <-t.wake:
			timer.Stop()
		case <-timer.C():
		}
	}
}

// round hands back what was let go of, takes or lets go of units to keep the fair share (if
// balance), and marks the units to keep warm.
func (t *Table) round(ctx context.Context, balance bool) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.RenewDeadline/2)
	defer cancel()
	now := t.clock.Now()
	t.mu.Lock()
	t.observe(now)
	t.mu.Unlock()
	t.handBackReleased(ctx)
	if balance {
		t.balance(ctx, now)
	}
	t.mu.Lock()
	t.markStandby()
	t.mu.Unlock()
}

// lose lets go of u at once, without handing its Lease back: another replica takes it when it
// expires. The caller holds t.mu.
func (t *Table) lose(u *unit, why string) {
	u.held, u.releasing = false, false
	u.claim.refreshLocked() // its writes stop now, before the run does
	t.log.Info("lost a unit: stopping it", "unit", u.name, "reason", why)
	t.changed(u)
}

// balance decides with package placement what to let go of and what to take, and does it.
func (t *Table) balance(ctx context.Context, now time.Time) {
	var takes []leaseWrite
	t.mu.Lock()
	v := placement.View{
		Self:          t.opts.Identity,
		Replicas:      t.replicas,
		Leases:        map[string]placement.Lease{},
		Now:           now,
		BalanceFrom:   t.balanceFrom,
		LastSpread:    t.lastSpread,
		Joined:        t.joined,
		RetryPeriod:   t.opts.RetryPeriod,
		SpreadBackoff: 10 * t.opts.LeaseDuration,
	}
	units := t.sortedUnits()
	for name := range t.spreadTried { // a removed plugin's units are forgotten
		if _, ok := t.units[name]; !ok {
			delete(t.spreadTried, name)
		}
	}
	for _, u := range units {
		v.Units = append(v.Units, placement.Unit{Name: u.name, Held: u.held, Releasing: u.releasing, Running: u.claim.runs(u.name), SpreadTried: t.spreadTried[u.name]})
	}
	for _, s := range t.seen {
		if s.lease.Labels[RoleLabel] != RoleUnit {
			continue
		}
		l := placement.Lease{Since: s.at, OfferedTo: s.lease.Annotations[OfferedToAnnotation]}
		if !t.expired(s, now) {
			l.Holder = holder(s.lease)
		}
		v.Leases[s.lease.Annotations[UnitAnnotation]] = l
	}
	d := placement.Decide(v)
	t.deferred = d.RetryAt
	for _, r := range d.Release {
		u := t.units[r.Unit]
		u.held, u.releasing, u.offerTo = false, true, ""
		kv := []any{"unit", u.name, "share", (len(units) + len(t.replicas) - 1) / len(t.replicas), "replicas", len(t.replicas)}
		switch r.Reason {
		case placement.OverShare:
			t.log.Info("letting a unit go: this replica holds more than its share", kv...)
		case placement.Floor:
			t.log.Info("letting a unit go: another replica holds less than its share while this one holds most", kv...)
		case placement.Spread:
			t.spreadTried[u.name], t.lastSpread = now, now
			t.log.Info("letting a unit go: another replica has room for it, and this one holds more than its share of its plugin's shards", "unit", u.name, "to", r.To)
		case placement.Exchange:
			t.spreadTried[u.name], t.lastSpread = now, now
			u.offerTo = r.To
			t.log.Info("offering a unit to another replica: this one holds more than its share of its plugin's shards, the other fewer; it gives one of its own back", "unit", u.name, "to", r.To)
		}
		t.changed(u)
	}
	for _, name := range d.Take {
		u := t.units[name]
		w := leaseWrite{u: u}
		if s, ok := t.seen[u.lease]; ok {
			w.lease = s.lease.DeepCopy()
		}
		takes = append(takes, w)
	}
	t.mu.Unlock()
	for _, w := range takes {
		t.take(ctx, w, now)
	}
}

// markStandby marks the units this replica would take over first: those it ranks first for
// among the live replicas other than the holder.
func (t *Table) markStandby() {
	for _, u := range t.units {
		standby := false
		if !u.held && !u.releasing {
			h := ""
			if s, ok := t.seen[u.lease]; ok {
				h = holder(s.lease)
			}
			standby = placement.Standby(t.replicas, t.opts.Identity, h, u.name)
		}
		if standby != u.standby {
			u.standby = standby
			t.changed(u)
		}
	}
}

// changed tells u's claim.
func (t *Table) changed(u *unit) { u.claim.notify() }

func (t *Table) sortedUnits() []*unit {
	out := make([]*unit, 0, len(t.units))
	for _, u := range t.units {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *unit) int { return strings.Compare(a.name, b.name) })
	return out
}

// handBack lets go of everything when the table stops: it waits for the runs to return, hands
// back the Leases held and deletes this replica's Lease.
func (t *Table) handBack() {
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.LeaseDuration)
	defer cancel()
	t.mu.Lock()
	for _, u := range t.units {
		if u.held {
			u.held, u.releasing = false, true
			t.changed(u)
		}
	}
	t.mu.Unlock()
	for !t.runsDone() {
		select {
		case <-ctx.Done():
			t.log.Info("stopping: runs still going after the lease duration; their Leases expire instead")
			return
		case <-t.clock.After(50 * time.Millisecond):
		}
	}
	t.handBackReleased(ctx)
	if err := t.leases.Delete(ctx, t.replicaLease(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.log.Error(err, "deleting this replica's Lease; it expires instead")
	}
	t.log.Info("handed back every unit")
}

// runsDone reports whether no run holds a unit let go of.
func (t *Table) runsDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, u := range append(t.sortedUnits(), t.closing...) {
		if u.releasing && u.claim.runs(u.name) {
			return false
		}
	}
	return true
}
