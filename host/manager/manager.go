package manager

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/cache"
)

// Runnable is anything the manager runs: Start blocks until ctx is done (or it fails).
type Runnable interface {
	Start(ctx context.Context) error
}

// RunnableFunc adapts a function to a Runnable. Function values cannot be compared, so a
// RunnableFunc cannot be removed: wrap it in a pointer type to remove it later.
type RunnableFunc func(context.Context) error

// Start calls f.
func (f RunnableFunc) Start(ctx context.Context) error { return f(ctx) }

// LeaderElectionRunnable says which group a runnable belongs to: NeedLeaderElection false
// puts it with the other runnables, true (the default for runnables without this method) with
// the runnables started only on the leader.
type LeaderElectionRunnable interface {
	NeedLeaderElection() bool
}

// cacheRunnable is what puts a runnable in the caches group.
type cacheRunnable interface {
	Runnable
	WaitForCacheSync(ctx context.Context) bool
}

// Options configure a Manager. The zero value is ready to use.
type Options struct {
	// GracefulShutdownTimeout bounds how long stopping waits for runnables to return. Defaults
	// to 30 seconds; 0 does not wait at all; a negative value waits as long as it takes.
	GracefulShutdownTimeout *time.Duration

	// Cache configures the manager's informer cache.
	Cache cache.Options

	// LeaderElection, if set, runs the leader-election group only while this replica holds the
	// Lease. Without it this replica is the leader.
	LeaderElection *LeaderElection

	// Logger defaults to logr.Discard().
	Logger logr.Logger
}

// DefaultGracefulShutdownTimeout is the GracefulShutdownTimeout when none is set.
const DefaultGracefulShutdownTimeout = 30 * time.Second

func (o Options) withDefaults() Options {
	if o.GracefulShutdownTimeout == nil {
		d := DefaultGracefulShutdownTimeout
		o.GracefulShutdownTimeout = &d
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.Cache.Logger.GetSink() == nil {
		o.Cache.Logger = o.Logger.WithName("cache")
	}
	return o
}

// Manager runs runnables in four groups, started in this order and stopped in reverse:
// HTTP servers, caches (each synced before the next group starts), other runnables, and
// runnables that need leader election.
type Manager struct {
	opts  Options
	cfg   *rest.Config
	cache *cache.Cache

	servers, caches, others, leaders *group
	errs                             chan error // the first runnable error; buffered, later ones are logged
	synced                           chan struct{}
	elected                          chan struct{}

	mu      sync.Mutex
	started bool

	// electorDone is closed when the leader elector has returned (nil without leader election).
	electorDone chan struct{}
	stopElector context.CancelFunc
	stopping    atomic.Bool
}

// New returns a manager for the cluster cfg points at, with a shared informer cache in its
// caches group. A nil cfg makes a manager with no cache, for runnables that need no cluster.
func New(cfg *rest.Config, opts Options) (*Manager, error) {
	opts = opts.withDefaults()
	m := &Manager{
		opts:    opts,
		cfg:     cfg,
		errs:    make(chan error, 1),
		synced:  make(chan struct{}),
		elected: make(chan struct{}),
	}
	m.servers = m.newGroup("servers", nil)
	m.caches = m.newGroup("caches", func(ctx context.Context, r Runnable) bool {
		return r.(cacheRunnable).WaitForCacheSync(ctx)
	})
	m.others = m.newGroup("host services", nil)
	m.leaders = m.newGroup("controllers", nil)
	if cfg != nil {
		c, err := cache.New(cfg, opts.Cache)
		if err != nil {
			return nil, err
		}
		m.cache = c
		if err := m.Add(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Manager) newGroup(name string, ready func(context.Context, Runnable) bool) *group {
	return &group{name: name, ready: ready, onError: m.runnableFailed}
}

// runnableFailed keeps the first error for Start to return; it stops the manager.
func (m *Manager) runnableFailed(err error) {
	select {
	case m.errs <- err:
	default:
		m.opts.Logger.Error(err, "runnable failed while the manager was already stopping")
	}
}

// GetCache returns the shared informer cache (nil for a manager made without a config).
func (m *Manager) GetCache() *cache.Cache { return m.cache }

// GetConfig returns the config the manager was made with.
func (m *Manager) GetConfig() *rest.Config { return m.cfg }

// Elected is closed when the leader-election group starts.
func (m *Manager) Elected() <-chan struct{} { return m.elected }

// Synced is closed once the caches group has started and synced, on every replica.
func (m *Manager) Synced() <-chan struct{} { return m.synced }

func (m *Manager) groupFor(r Runnable) *group {
	switch r := r.(type) {
	case *Server:
		return m.servers
	case cacheRunnable:
		return m.caches
	case LeaderElectionRunnable:
		if !r.NeedLeaderElection() {
			return m.others
		}
	}
	return m.leaders
}

// Add registers r. Before Start it waits to be started with its group; after, it starts at once.
func (m *Manager) Add(r Runnable) error {
	if r == nil {
		return errors.New("manager: Add(nil)")
	}
	return m.groupFor(r).add(r)
}

// Remove stops r (cancelling its context and waiting, at most until ctx ends, for its Start to
// return) and forgets it. It returns what r's Start returned. r must be comparable (a pointer):
// the manager finds it by identity. Once the manager is stopping, what it does not find it has
// stopped already, and that is not an error.
func (m *Manager) Remove(ctx context.Context, r Runnable) error {
	if r == nil || !reflect.TypeOf(r).Comparable() {
		return fmt.Errorf("manager: cannot remove a runnable of type %T: it is not comparable; add a pointer to remove it later", r)
	}
	found, err := m.groupFor(r).remove(ctx, r)
	if !found {
		return fmt.Errorf("manager: %s is not running in this manager", describe(r))
	}
	if errors.Is(err, context.Canceled) {
		err = nil // the runnable reported the cancellation Remove asked for
	}
	return err
}

// Start runs the groups in order and blocks until ctx is done or a runnable fails; then it stops
// the groups in reverse order, waiting for them at most GracefulShutdownTimeout. It returns the
// first runnable error, joined with a shutdown timeout if there was one. A manager starts once.
func (m *Manager) Start(ctx context.Context) (err error) {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("manager: already started")
	}
	m.started = true
	m.mu.Unlock()

	// The groups run under a context of their own so that they can be stopped one by one, in
	// reverse order, after ctx is done. It keeps ctx's values.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer func() { err = errors.Join(err, m.stop(err)) }()

	startErr := make(chan error, 1)
	go func() { startErr <- m.startGroups(runCtx) }()
	select {
	case err := <-startErr:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		cancel() // unblocks startGroups while it waits for caches to sync
		<-startErr
		return nil
	case err := <-m.errs:
		cancel()
		<-startErr
		return err
	}

	m.opts.Logger.Info("manager started")
	select {
	case <-ctx.Done():
		return nil
	case err := <-m.errs:
		return err
	}
}

func (m *Manager) startGroups(ctx context.Context) error {
	for _, g := range []*group{m.servers, m.caches, m.others} {
		if err := g.start(ctx); err != nil {
			return err
		}
		if g == m.caches {
			close(m.synced)
		}
	}
	if m.opts.LeaderElection == nil { // this host is the leader
		if err := m.leaders.start(ctx); err != nil {
			return err
		}
		close(m.elected)
		return nil
	}
	le := m.opts.LeaderElection.withDefaults()
	elector, err := m.newElector(le, func(context.Context) {
		m.opts.Logger.Info("became the leader: starting controllers", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
		if err := m.leaders.start(ctx); err != nil {
			m.runnableFailed(err)
			return
		}
		close(m.elected)
	}, func() {
		if !m.stopping.Load() {
			m.runnableFailed(fmt.Errorf("%w: lease %s/%s, identity %s", ErrLeaderElectionLost, le.Namespace, le.Name, le.Identity))
		}
	})
	if err != nil {
		return err
	}
	// The elector has a context of its own: cancelling it releases the lease, which must happen
	// after the leader group has stopped, not before.
	electorCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stopElector, m.electorDone = cancel, make(chan struct{})
	m.opts.Logger.Info("waiting to become the leader", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
	go func() {
		defer close(m.electorDone)
		elector.Run(electorCtx)
	}()
	return nil
}

// Running names the runnables that have started and not yet returned, leader-election ones
// first: what a stop is still waiting for.
func (m *Manager) Running() []string {
	var names []string
	for _, g := range []*group{m.leaders, m.others, m.caches, m.servers} {
		names = append(names, g.running()...)
	}
	return names
}

// lateGroupGrace is how long a group is given to stop once an earlier group has used up the
// graceful-shutdown timeout: enough for runnables that return when cancelled, so that only the
// ones truly stuck are named.
const lateGroupGrace = 200 * time.Millisecond

// stop stops the groups in reverse order within the graceful-shutdown timeout. cause, if not
// nil, is the failure that stops it: said first, so that the log reads in the order of events.
func (m *Manager) stop(cause error) error {
	if cause != nil {
		m.opts.Logger.Error(cause, "stopping the manager: a runnable failed", "gracefulShutdownTimeout", *m.opts.GracefulShutdownTimeout)
	} else {
		m.opts.Logger.Info("stopping the manager", "gracefulShutdownTimeout", *m.opts.GracefulShutdownTimeout)
	}
	timeout := *m.opts.GracefulShutdownTimeout
	ctx := context.Background()
	if timeout >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	m.stopping.Store(true)
	var errs []error
	for i, g := range []*group{m.leaders, m.others, m.caches, m.servers} {
		gctx := ctx
		if ctx.Err() != nil { // an earlier group used up the timeout: still let this one stop
			var cancel context.CancelFunc
			gctx, cancel = context.WithTimeout(context.Background(), lateGroupGrace)
			defer cancel()
		}
		if err := g.stopAndWait(gctx); err != nil {
			errs = append(errs, err)
		}
		if i == 0 && m.stopElector != nil { // controllers are stopped: hand the lease back
			m.stopElector()
			select {
			case <-m.electorDone:
			case <-ctx.Done():
				errs = append(errs, errors.New("manager: the leader elector did not stop within the graceful-shutdown timeout"))
			}
		}
	}
	return errors.Join(errs...)
}
