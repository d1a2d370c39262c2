package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection configures leader election with a coordination.k8s.io Lease: only the leader
// runs the leader-election group (controllers and plugins); every replica runs the others, so a
// follower's caches are warm when it takes over.
type LeaderElection struct {
	// Namespace and Name of the Lease. Both required.
	Namespace, Name string
	// Identity of this replica in the Lease. Defaults to the hostname and a random suffix.
	Identity string
	// LeaseDuration is how long a lease is held without renewal before another replica may take
	// it. Defaults to 15 seconds.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying to renew before it gives up. Defaults
	// to 10 seconds.
	RenewDeadline time.Duration
	// RetryPeriod is how often replicas try to acquire or renew. Defaults to 2 seconds.
	RetryPeriod time.Duration
	// ReleaseOnCancel hands the lease back when the manager stops, so another replica takes over
	// at once instead of after LeaseDuration. Defaults to true.
	ReleaseOnCancel *bool
}

// Lease defaults, as controller-runtime has them.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

func (le LeaderElection) withDefaults() LeaderElection {
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = host + "_" + uuid.NewString()
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration = DefaultLeaseDuration
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = DefaultRenewDeadline
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = DefaultRetryPeriod
	}
	if le.ReleaseOnCancel == nil {
		t := true
		le.ReleaseOnCancel = &t
	}
	return le
}

// ErrLeaderElectionLost is returned by Start when this replica loses its lease: it must stop
// reconciling at once, and the process should exit and start again as a follower.
var ErrLeaderElectionLost = errors.New("manager: leader election lost")

// newElector builds the elector; onLead starts the leader group.
func (m *Manager) newElector(le LeaderElection, onLead func(context.Context), onLost func()) (*leaderelection.LeaderElector, error) {
	if le.Namespace == "" || le.Name == "" {
		return nil, errors.New("manager: leader election needs the Lease's namespace and name")
	}
	if m.cfg == nil {
		return nil, errors.New("manager: leader election needs a cluster config")
	}
	cs, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(m.cfg), "leader-election"))
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: le.Identity})
	if err != nil {
		return nil, fmt.Errorf("manager: lease %s/%s: %w", le.Namespace, le.Name, err)
	}
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: *le.ReleaseOnCancel,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: onLead,
			OnStoppedLeading: onLost,
		},
	})
}
