package ownership

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// leaseName is the Lease of a unit: the group, then the unit with "/" as ".".
func (t *Table) leaseName(unitName string) string {
	return t.opts.Group + "-unit." + strings.ReplaceAll(unitName, "/", ".")
}

func (t *Table) replicaLease() string {
	sum := sha256.Sum256([]byte(t.opts.Identity))
	return t.opts.Group + "-replica." + hex.EncodeToString(sum[:8])
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
			delete(l.Annotations, OfferedToAnnotation)
			if u.offerTo != "" {
				if l.Annotations == nil {
					l.Annotations = map[string]string{}
				}
				l.Annotations[OfferedToAnnotation] = u.offerTo
				u.offerTo = ""
			}
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
		delete(next.Annotations, OfferedToAnnotation)
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
	if from != "" {
		t.log.Info("took a unit: starting it", "unit", w.u.name, "from", from)
	} else {
		t.log.Info("took a unit: starting it", "unit", w.u.name)
	}
	t.changed(w.u)
}
