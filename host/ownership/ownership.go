package ownership

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/wasmrec/wasmrec/host/manager"
)

// SharingReplicas lists the replicas sharing plugins in group that are live now: what a host
// about to run every plugin by leader election checks first.
func SharingReplicas(ctx context.Context, cs kubernetes.Interface, namespace, group string) ([]string, error) {
	list, err := cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: GroupLabel + "=" + group + "," + RoleLabel + "=" + RoleReplica})
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		l := &list.Items[i]
		d := DefaultLeaseDuration
		if l.Spec.LeaseDurationSeconds != nil {
			d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		if holder(l) != "" && l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < d {
			out = append(out, holder(l))
		}
	}
	return out, nil
}

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
	lastError   string               // the last Lease call error said, see leaseError
	// replicasChanged is closed and replaced when replicas changes.
	replicasChanged chan struct{}
	started         bool
}

// seen is a Lease as last observed, and when it last changed, by this replica's clock: a Lease
// has expired when it has not changed for its duration (clocks of replicas are not compared).
type seen struct {
	lease   *coordinationv1.Lease
	version string
	at      time.Time
}

// unit is one unit's state on this replica.
type unit struct {
	name, lease string
	claim       *Claim
	held        bool      // this replica holds the Lease and may run the unit
	releasing   bool      // let go of: its Lease is handed back once no run holds it
	renewed     time.Time // the last successful renewal
	standby     bool      // this replica would take it over next
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
	return &Table{
		opts:   opts,
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

// leaseName is the Lease of a unit: the group, then the unit with "/" as ".".
func (t *Table) leaseName(unitName string) string {
	return t.opts.Group + "-unit." + strings.ReplaceAll(unitName, "/", ".")
}

func (t *Table) replicaLease() string {
	sum := sha256.Sum256([]byte(t.opts.Identity))
	return t.opts.Group + "-replica." + hex.EncodeToString(sum[:8])
}

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
	balanceFrom := time.Now().Add(t.opts.RetryPeriod)
	t.mu.Lock()
	t.balanceFrom = balanceFrom
	t.mu.Unlock()
	var nextRenew time.Time
	for {
		now := time.Now()
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
		timer := time.NewTimer(time.Until(wake) + time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			stopDeadlines()
			t.handBack()
			return nil
		case <-t.wake:
			timer.Stop()
		case <-timer.C:
		}
	}
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
	t.seen[l.Name] = seen{lease: l, version: l.ResourceVersion, at: time.Now()}
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
		if e.After(time.Now()) && (first.IsZero() || e.Before(first)) {
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
		tick := time.NewTicker(t.opts.RetryPeriod / 4)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
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

// renew renews this replica's Lease and the unit Leases it holds. Lease calls are made without
// t.mu held, each bounded by half the renew deadline.
func (t *Table) renew(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.RenewDeadline/2)
	defer cancel()
	if err := t.renewReplica(ctx, now); err != nil {
		t.leaseError(err, "renewing this replica's Lease")
	}
	t.renewHeld(ctx, now)
	t.collect(ctx, now)
	t.checkLeader(ctx, now)
}

// leaseError says a failed Lease call: at the default level once per distinct error (a missing
// namespace or permission fails every call of every round alike), then at -v 1.
func (t *Table) leaseError(err error, msg string, kv ...any) {
	t.mu.Lock()
	again := err.Error() == t.lastError
	t.lastError = err.Error()
	t.mu.Unlock()
	if again {
		t.log.V(1).Info(msg+" failed again", append(kv, "error", err.Error())...)
		return
	}
	if se := (*apierrors.StatusError)(nil); errors.As(err, &se) && apierrors.IsNotFound(err) && se.ErrStatus.Details != nil && se.ErrStatus.Details.Kind == "namespaces" {
		msg += ": the Leases' namespace does not exist; create it, or set --leader-election-namespace to one that does"
	} else if apierrors.IsForbidden(err) {
		msg += ": this replica needs get, list, watch, create, update and delete on leases (coordination.k8s.io) in its namespace"
	}
	t.log.Error(err, msg, kv...)
}

// checkLeader says, once per holder, when a host run with --leader-elect holds the leader
// Lease of the same name: it runs every plugin while these replicas share them.
func (t *Table) checkLeader(ctx context.Context, now time.Time) {
	l, err := t.leases.Get(ctx, t.opts.Group, metav1.GetOptions{})
	if err != nil || holder(l) == "" || l.Spec.RenewTime == nil || now.Sub(l.Spec.RenewTime.Time) > t.durationOf(seen{lease: l}) {
		return
	}
	if h := holder(l); h != t.leaderSeen {
		t.leaderSeen = h
		t.log.Error(nil, "a host run with --leader-elect holds the leader Lease of this group: it runs every plugin while these replicas share them, so each plugin runs twice; run every replica with --share-plugins, or every one with --leader-elect",
			"lease", t.opts.Namespace+"/"+t.opts.Group, "holder", h)
	}
}

// round hands back what was let go of, takes or lets go of units to keep the fair share (if
// balance), and marks the units to keep warm.
func (t *Table) round(ctx context.Context, balance bool) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.RenewDeadline/2)
	defer cancel()
	now := time.Now()
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

func (t *Table) renewReplica(ctx context.Context, now time.Time) error {
	name := t.replicaLease()
	cur, err := t.leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = t.leases.Create(ctx, t.newLease(name, RoleReplica, "", now), metav1.CreateOptions{})
		return err
	case err != nil:
		return err
	}
	cur.Spec.HolderIdentity = &t.opts.Identity
	cur.Spec.RenewTime = &metav1.MicroTime{Time: now}
	_, err = t.leases.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

func (t *Table) newLease(name, role, unitName string, now time.Time) *coordinationv1.Lease {
	secs := int32(t.opts.LeaseDuration / time.Second)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.opts.Namespace, Labels: map[string]string{GroupLabel: t.opts.Group, RoleLabel: role}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &t.opts.Identity,
			LeaseDurationSeconds: &secs,
			AcquireTime:          &metav1.MicroTime{Time: now},
			RenewTime:            &metav1.MicroTime{Time: now},
		},
	}
	if unitName != "" {
		l.Annotations = map[string]string{UnitAnnotation: unitName}
	}
	return l
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

// collect deletes the Leases not renewed for ten lease durations: of replicas gone for good (a
// killed replica cannot delete its own), and of units this replica does not claim (plugins
// removed, or their shards changed). A replica that claims such a unit makes its Lease again.
func (t *Table) collect(ctx context.Context, now time.Time) {
	var dead []string
	t.mu.Lock()
	for name, s := range t.seen {
		r := s.lease.Spec.RenewTime
		if r == nil || now.Sub(r.Time) <= 10*t.durationOf(s) {
			continue
		}
		switch s.lease.Labels[RoleLabel] {
		case RoleReplica:
			dead = append(dead, name)
		case RoleUnit:
			if _, mine := t.units[s.lease.Annotations[UnitAnnotation]]; !mine {
				dead = append(dead, name)
			}
		}
	}
	t.mu.Unlock()
	for _, name := range dead {
		if err := t.leases.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
			t.log.Info("deleted a Lease not renewed for ten lease durations: its replica or unit is gone", "lease", name)
		}
	}
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

// leaseWrite is a Lease call planned under t.mu and made without it.
type leaseWrite struct {
	u     *unit
	lease *coordinationv1.Lease // to update; nil to create
}

// renewHeld renews the Leases this replica holds; one that another replica holds now, or that
// is gone, it lets go of at once. (watchDeadlines lets go of those it cannot renew.)
func (t *Table) renewHeld(ctx context.Context, now time.Time) {
	var renew []leaseWrite
	t.mu.Lock()
	for _, u := range t.sortedUnits() {
		if !u.held {
			continue
		}
		s, ok := t.seen[u.lease]
		switch {
		case !ok:
			t.lose(u, "its Lease was deleted")
		case holder(s.lease) != t.opts.Identity:
			t.lose(u, fmt.Sprintf("replica %s holds its Lease now", holder(s.lease)))
		default:
			l := s.lease.DeepCopy()
			l.Spec.RenewTime = &metav1.MicroTime{Time: now}
			renew = append(renew, leaseWrite{u: u, lease: l})
		}
	}
	t.mu.Unlock()
	for _, w := range renew {
		updated, err := t.leases.Update(ctx, w.lease, metav1.UpdateOptions{})
		t.mu.Lock()
		if err == nil {
			t.seen[w.u.lease] = seen{lease: updated, version: updated.ResourceVersion, at: now}
			if w.u.held {
				w.u.renewed = now
				w.u.claim.refreshLocked()
			}
		} else {
			t.log.V(1).Info("renewing a unit's Lease failed", "unit", w.u.name, "error", err.Error())
		}
		t.mu.Unlock()
	}
}

// lose lets go of u at once, without handing its Lease back: another replica takes it when it
// expires. The caller holds t.mu.
func (t *Table) lose(u *unit, why string) {
	u.held, u.releasing = false, false
	u.claim.refreshLocked() // its writes stop now, before the run does
	t.log.Info("lost a unit: stopping it", "unit", u.name, "reason", why)
	t.changed(u)
}

// handBackReleased hands back the Leases let go of whose runs have returned.
func (t *Table) handBackReleased(ctx context.Context) {
	var back []leaseWrite
	t.mu.Lock()
	for _, u := range append(t.sortedUnits(), t.closing...) {
		if !u.releasing || u.claim.runs(u.name) {
			continue
		}
		u.releasing = false
		if s, ok := t.seen[u.lease]; ok && holder(s.lease) == t.opts.Identity {
			l := s.lease.DeepCopy()
			empty := ""
			l.Spec.HolderIdentity = &empty
			back = append(back, leaseWrite{u: u, lease: l})
		}
	}
	var closing []*unit
	for _, u := range t.closing {
		if u.releasing { // its run has not returned yet
			closing = append(closing, u)
		}
	}
	t.closing = closing
	t.mu.Unlock()
	for _, w := range back {
		if _, err := t.leases.Update(ctx, w.lease, metav1.UpdateOptions{}); err != nil {
			t.log.Info("handing back a unit's Lease failed; it expires instead", "unit", w.u.name, "error", err.Error())
			continue
		}
		t.log.Info("handed a unit back for another replica to run", "unit", w.u.name)
	}
}

// score is how much replica prefers unitName: rendezvous hashing.
func score(replica, unitName string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(replica))
	h.Write([]byte{0})
	h.Write([]byte(unitName))
	return h.Sum64()
}

// groupOf splits a unit's name into its group and index: "plugin/2" is shard 2 of group
// "plugin"; "plugin" is group "plugin", index 0.
func groupOf(unitName string) (group string, index int) {
	if g, i, ok := strings.Cut(unitName, "/"); ok {
		if n, err := strconv.Atoi(i); err == nil && n >= 0 {
			return g, n
		}
	}
	return unitName, 0
}

// rank orders replicas by their preference for unitName, most first: rendezvous hashing of its
// group, turned by its index, so that the units of one group (the shards of a plugin) are
// first preferred by different replicas, and spread.
func rank(replicas []string, unitName string) []string {
	group, index := groupOf(unitName)
	out := slices.Clone(replicas)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(score(b, group), score(a, group)), strings.Compare(a, b))
	})
	if len(out) > 0 {
		k := index % len(out)
		out = slices.Concat(out[k:], out[:k])
	}
	return out
}

// place is where replica comes in rank(replicas, unitName): 0 for the replica preferred most.
func place(replicas []string, replica, unitName string) int {
	return slices.Index(rank(replicas, unitName), replica)
}

// balance takes free units while under the fair share, and lets go of the least preferred
// ones while over it.
func (t *Table) balance(ctx context.Context, now time.Time) {
	var takes []leaseWrite
	t.mu.Lock()
	t.deferred = time.Time{}
	units := t.sortedUnits()
	fair := (len(units) + len(t.replicas) - 1) / len(t.replicas)
	held := 0
	groupSize, groupHeld := map[string]int{}, map[string]int{}
	places := make(map[*unit]int, len(units))
	for _, u := range units {
		places[u] = place(t.replicas, t.opts.Identity, u.name)
		g, _ := groupOf(u.name)
		groupSize[g]++
	}
	// Units by this replica's preference, most preferred first: those it comes first for, then
	// second, ...; among equals, the units of larger groups first (a plugin's shards, each
	// preferred by another replica, before plugins any replica may run), then by hash.
	slices.SortStableFunc(units, func(a, b *unit) int {
		ga, _ := groupOf(a.name)
		gb, _ := groupOf(b.name)
		return cmp.Or(cmp.Compare(places[a], places[b]), cmp.Compare(groupSize[gb], groupSize[ga]),
			cmp.Compare(score(t.opts.Identity, b.name), score(t.opts.Identity, a.name)))
	})
	// held counts the units held, not those let go of whose Leases are not handed back yet
	// (letting): a round that comes before the hand-back must not let go of more.
	letting := 0
	for _, u := range units {
		g, _ := groupOf(u.name)
		switch {
		case u.held:
			held++
			groupHeld[g]++
		case u.releasing:
			letting++
		}
	}
	releasing := letting > 0
	// crowded: this replica holds more of u's group than the group's own share, so that
	// letting go of u spreads the group (the shards of a plugin) over the replicas.
	crowded := func(u *unit) bool {
		g, _ := groupOf(u.name)
		return groupHeld[g] > (groupSize[g]+len(t.replicas)-1)/len(t.replicas)
	}
	// Over the share, let go of the surplus. At the share, while a replica is below the
	// share rounded down (10 units on 3 replicas: 4, 4 and 2), the replica holding most (the
	// first by identity among equals) lets one go, so the split ends 4, 3 and 3.
	keep := fair
	if held == fair && !releasing && t.richestWhileOneStarves(fair, now) {
		keep = fair - 1
	}
	// The least preferred first: shards of a crowded group, then plugins not split, then the
	// rest (a shard not crowded here would likely crowd the replica that takes it).
	const crowdedShards, whole, rest = 0, 1, 2
	for _, pass := range []int{crowdedShards, whole, rest} {
		for i := len(units) - 1; i >= 0 && held > keep; i-- {
			u := units[i]
			g, _ := groupOf(u.name)
			if u.held && (pass == rest || pass == crowdedShards && crowded(u) || pass == whole && groupSize[g] == 1) {
				u.held, u.releasing = false, true
				held--
				groupHeld[g]--
				if keep < fair {
					t.log.Info("letting a unit go: another replica holds less than its share while this one holds most", "unit", u.name, "share", fair, "replicas", len(t.replicas))
				} else {
					t.log.Info("letting a unit go: this replica holds more than its share", "unit", u.name, "share", fair, "replicas", len(t.replicas))
				}
				t.changed(u)
			}
		}
	}
	// At or under its share, a replica holding more than its share of a group's units (a
	// plugin's shards) lets one go when another replica has room for it and holds less of the
	// group: one at a time, and once a unit came back (no other replica took it), not again
	// for a while.
	if held <= keep && !releasing {
		for i := len(units) - 1; i >= 0; i-- {
			u := units[i]
			if !u.held || !crowded(u) || now.Sub(t.spreadTried[u.name]) < 10*t.opts.LeaseDuration {
				continue
			}
			if r, spreads := t.firstInLine(u.name, fair, now); spreads && r != t.opts.Identity {
				u.held, u.releasing = false, true
				held--
				t.spreadTried[u.name] = now
				t.log.Info("letting a unit go: another replica has room for it, and this one holds more than its share of its plugin's shards", "unit", u.name, "to", r)
				t.changed(u)
			}
			break
		}
	}
	// While a replica is below the share rounded down, one at or above it takes nothing.
	// Units let go of still count until handed back: taking more meanwhile would only hold
	// more than the share for a moment.
	held += letting
	if t.starving(now) && held >= len(t.units)/len(t.replicas) {
		fair = held
	}
	for _, u := range units {
		if held >= fair {
			break
		}
		if u.held || u.releasing || u.claim.runs(u.name) {
			continue
		}
		s, exists := t.seen[u.lease]
		if exists && !t.expired(s, now) {
			continue
		}
		// A unit another replica under its share is first in line for is left to it for a
		// retry period (from when it was let go of, or from when replicas started together
		// begin to take units, whichever is later): the replica that kept it warm, if
		// warmStandby, takes it, and the shards of a plugin go to the replicas they prefer,
		// which differ.
		since := t.balanceFrom
		if exists && s.at.After(since) {
			since = s.at
		}
		if now.Sub(since) < t.opts.RetryPeriod {
			if first, _ := t.firstInLine(u.name, fair, now); first != t.opts.Identity {
				if again := since.Add(t.opts.RetryPeriod); t.deferred.IsZero() || again.Before(t.deferred) {
					t.deferred = again
				}
				continue
			}
		}
		w := leaseWrite{u: u}
		if exists {
			w.lease = s.lease.DeepCopy()
		}
		takes = append(takes, w)
		held++
	}
	t.mu.Unlock()
	for _, w := range takes {
		t.take(ctx, w, now)
	}
}

// heldBy counts the unit Leases each replica holds, as seen. The caller holds t.mu.
func (t *Table) heldBy(now time.Time) map[string]int {
	held := map[string]int{}
	for _, s := range t.seen {
		if s.lease.Labels[RoleLabel] == RoleUnit && !t.expired(s, now) {
			held[holder(s.lease)]++
		}
	}
	return held
}

// starving reports whether a live replica other than this one holds fewer units than the share
// rounded down. The caller holds t.mu.
func (t *Table) starving(now time.Time) bool {
	floor := len(t.units) / len(t.replicas)
	held := t.heldBy(now)
	for _, r := range t.replicas {
		if r != t.opts.Identity && held[r] < floor {
			return true
		}
	}
	return false
}

// richestWhileOneStarves reports whether a live replica holds fewer units than the share
// rounded down while this one is the replica holding most (the first by identity among
// equals). The caller holds t.mu.
func (t *Table) richestWhileOneStarves(fair int, now time.Time) bool {
	floor := len(t.units) / len(t.replicas)
	held := t.heldBy(now)
	// While a unit is free, the replica below the floor takes it: letting go of one more would
	// only pass units back and forth (16 units on 2 replicas, 8 and 7 while one is free).
	total := 0
	for _, r := range t.replicas {
		total += held[r]
	}
	if total < len(t.units) {
		return false
	}
	starving, richest := false, t.opts.Identity
	for _, r := range t.replicas {
		if held[r] < floor {
			starving = true
		}
		if held[r] > held[richest] || (held[r] == held[richest] && r < richest) {
			richest = r
		}
	}
	return starving && richest == t.opts.Identity && held[richest] >= fair
}

// firstInLine is the live replica under the fair share that prefers unitName most, one that
// holds less than its share of the unit's group (the plugin's shards) before one that does not.
// The caller holds t.mu.
func (t *Table) firstInLine(unitName string, fair int, now time.Time) (replica string, spreads bool) {
	held := t.heldBy(now)
	floor := len(t.units) / len(t.replicas)
	group, _ := groupOf(unitName)
	inGroup, size := map[string]int{}, 0
	for _, s := range t.seen {
		if g, _ := groupOf(s.lease.Annotations[UnitAnnotation]); g == group && s.lease.Labels[RoleLabel] == RoleUnit && !t.expired(s, now) {
			inGroup[holder(s.lease)]++
		}
	}
	for name := range t.units {
		if g, _ := groupOf(name); g == group {
			size++
		}
	}
	groupShare := (size + len(t.replicas) - 1) / len(t.replicas)
	for _, below := range []int{floor, fair} {
		for _, spread := range []bool{true, false} {
			for _, r := range rank(t.replicas, unitName) {
				if held[r] < below && (!spread || inGroup[r] < groupShare) {
					return r, spread
				}
			}
		}
	}
	return t.opts.Identity, false
}

// take writes this replica into a unit's Lease; nothing if another replica was faster.
func (t *Table) take(ctx context.Context, w leaseWrite, now time.Time) {
	var (
		l    *coordinationv1.Lease
		err  error
		from string
	)
	if w.lease == nil {
		l, err = t.leases.Create(ctx, t.newLease(w.u.lease, RoleUnit, w.u.name, now), metav1.CreateOptions{})
	} else {
		from = holder(w.lease)
		next := w.lease
		secs := int32(t.opts.LeaseDuration / time.Second)
		next.Spec.HolderIdentity = &t.opts.Identity
		next.Spec.LeaseDurationSeconds = &secs
		next.Spec.AcquireTime = &metav1.MicroTime{Time: now}
		next.Spec.RenewTime = &metav1.MicroTime{Time: now}
		if next.Spec.LeaseTransitions == nil {
			next.Spec.LeaseTransitions = new(int32)
		}
		*next.Spec.LeaseTransitions++
		l, err = t.leases.Update(ctx, next, metav1.UpdateOptions{})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			t.leaseError(err, "taking a unit's Lease", "unit", w.u.name)
		}
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen[w.u.lease] = seen{lease: l, version: l.ResourceVersion, at: now}
	if t.units[w.u.name] != w.u { // its claim closed meanwhile: give it back next round
		w.u.releasing = true
		return
	}
	w.u.held, w.u.renewed = true, now
	t.log.Info("took a unit: starting it", "unit", w.u.name, "from", from)
	t.changed(w.u)
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
			for _, r := range rank(t.replicas, u.name) {
				if r != h {
					standby = r == t.opts.Identity
					break
				}
			}
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
		case <-time.After(50 * time.Millisecond):
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
	return v != nil && time.Now().Before(*v)
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
// new set. A unit let go of is handed back only after run has returned. It returns when ctx is
// done, or with run's error (run must return nil when ctx is cancelled).
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
				err = <-done
				break wait
			}
		}
		cancel()
		c.t.mu.Lock()
		c.running = nil
		c.refreshLocked()
		c.t.mu.Unlock()
		c.t.poke() // hand back at once what was let go of
		if err != nil || ctx.Err() != nil {
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
