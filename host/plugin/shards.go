package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/crdwatch"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/ownership"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/plugin/internal/watches"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/shard"
	"github.com/wasmrec/wasmrec/internal/backoff"
)

// MaxShards bounds a plugin's shards: each is a Lease, renewed every retry period.
const MaxShards = 64

// Units are the names under which replicas share the plugin: its name, or one per shard
// ("name/0", "name/1", ...).
func (p *Plugin) Units() []string {
	if p.cfg.Shards <= 1 {
		return []string{p.cfg.Name}
	}
	out := make([]string, p.cfg.Shards)
	for i := range out {
		out[i] = shard.Unit(p.cfg.Name, i)
	}
	return out
}

// shardsOf are the shard indexes of units (those Units names).
func (p *Plugin) shardsOf(units []string) []int {
	var out []int
	for _, u := range units {
		if plugin, i, ok := shard.SplitUnit(u); ok && plugin == p.cfg.Name {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// sharding is how the plugin's objects are split and which shards run here now.
func (p *Plugin) sharding() informers.Sharding { return p.share.running() }

// runShards sets the shards this replica runs from the next start of the controller on: the
// units it holds. Host.Run calls it only while the controller is stopped.
func (p *Plugin) runShards(units []string) {
	if p.cfg.Shards <= 1 {
		return
	}
	p.share.runNext(p.shardsOf(units))
}

// placeSources makes the controller's sources and the guest's reads follow the shards to run
// and the kinds' scopes as the API server serves them now, before the controller starts. A
// namespaced plugin splits every namespaced kind by namespace, so an object and the objects it
// owns or watches in its namespace are in one shard; a cluster-scoped one splits its For kind
// by uid. A kind not served when its sources were built was taken for namespaced: once it is
// served, a cluster-scoped kind is watched once for all, not once per namespace of the plugin.
func (p *Plugin) placeSources() error {
	next := p.share.running()
	if want, ok := p.share.next(); ok {
		field, err := p.shardField()
		if err != nil {
			return err
		}
		next = informers.Sharding{Field: field, Count: p.cfg.Shards, Held: want, For: p.forGVK}
	}
	p.swapMu.Lock()
	defer p.swapMu.Unlock()
	w := p.watches()
	w.Sharding = next
	srcs, err := w.Sources(p.Module().Manifest())
	if err != nil {
		return fmt.Errorf("plugin %q: %w", p.cfg.Name, err)
	}
	// A rollout's candidate with watches of its own moves too.
	ro := p.ro.Load()
	var cand watches.Sources
	if ro != nil && ro.srcs != nil {
		if cand, err = w.Sources(ro.cand.mod.Manifest()); err != nil {
			return fmt.Errorf("plugin %q: the rollout's new version: %w", p.cfg.Name, err)
		}
		for id := range cand {
			if s, ok := srcs[id]; ok {
				cand[id] = s // one source for both versions, as startWatches makes it
			}
		}
	}
	if sameSharding(p.share.running(), next) && sameIDs(srcs, p.srcs) && (ro == nil || sameIDs(cand, ro.srcs)) {
		return nil
	}
	// Nothing fails from here: the controller is stopped, so Unwatch only forgets a source and
	// Watch only records it. The shards are recorded last, so that a failure above is tried
	// again at the next start.
	for _, s := range p.allSources() {
		_ = p.ctrl.Unwatch(s.Src)
	}
	p.srcs = srcs
	if ro != nil && ro.srcs != nil {
		ro.srcs = cand
	}
	for _, s := range p.allSources() {
		if err := p.ctrl.Watch(s.Src); err != nil {
			return fmt.Errorf("plugin %q: %w", p.cfg.Name, err)
		}
	}
	p.setKeys(srcs, cand)
	if err := p.warm.update(); err != nil {
		p.log.Error(err, "holding the informers of the moved watches warm")
	}
	p.share.setRunning(next)
	if next.Count > 1 {
		p.log.Info("running shards", "shards", next.String())
	}
	return nil
}

// sameIDs reports whether a and b are the same sources, by what each watches and how.
func sameIDs(a, b watches.Sources) bool {
	return maps.EqualFunc(a, b, func(watches.Source, watches.Source) bool { return true })
}

func sameSharding(a, b informers.Sharding) bool {
	return a.Field == b.Field && a.Count == b.Count && slices.Equal(a.Held, b.Held)
}

// allSources are the controller's sources: the live version's, and those of a rollout's
// candidate that it alone has. Under swapMu.
func (p *Plugin) allSources() []watches.Source {
	out := slices.Collect(maps.Values(p.srcs))
	if ro := p.ro.Load(); ro != nil {
		for id, s := range ro.srcs {
			if _, ok := p.srcs[id]; !ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// shardField is what the plugin's objects are split by: their namespace if its For kind is
// namespaced, the uid of its For objects if not.
func (p *Plugin) shardField() (string, error) {
	m, err := p.host.mapper.RESTMapping(p.forGVK.GroupKind(), p.forGVK.Version)
	if err != nil {
		return "", fmt.Errorf("plugin %q: resolving %s to shard it: %w", p.cfg.Name, p.forGVK, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return shard.ByUID, nil
	}
	return shard.ByNamespace, nil
}

// keysWith are the informers the running module's watches use with sharding sh.
func (p *Plugin) keysWith(sh informers.Sharding) []cache.Key {
	m := p.Module().Manifest()
	var keys []cache.Key
	add := func(w abi.Watch, metadataOnly bool) {
		gvk, err := watches.ParseGVK(w)
		if err != nil {
			return
		}
		for _, k := range p.keysWithSharding(gvk, metadataOnly, sh) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	add(m.For, false)
	for _, w := range m.Owns {
		add(w, watches.OwnsMetadataOnly)
	}
	for _, w := range m.Watches {
		add(w, false)
	}
	return keys
}

// standbyKeys are the informers of the plugin or shards this replica would take over first.
func (p *Plugin) standbyKeys() []cache.Key {
	sb := p.share.standingBy()
	if len(sb) == 0 {
		return nil
	}
	if p.cfg.Shards <= 1 {
		return p.keysWith(informers.Sharding{})
	}
	field, err := p.shardField()
	if err != nil {
		return nil // not served yet: the warmer waits for it anyway
	}
	return p.keysWith(informers.Sharding{Field: field, Count: p.cfg.Shards, Held: p.shardsOf(sb), For: p.forGVK})
}

// shardFilter passes on only the requests of the shards this replica runs: a watched or owned
// object may map to a For object of another shard (one in another namespace, or a
// cluster-scoped one). A For object split by uid is looked up in this replica's shards.
func (p *Plugin) shardFilter(h handler.EventHandler) handler.EventHandler {
	return handler.WithRequestFilter(h, p.inShards)
}

// inShards reports whether req's For object is of the shards this replica runs.
func (p *Plugin) inShards(ctx context.Context, req reconcile.Request) bool {
	s := p.sharding()
	switch {
	case s.Count <= 1:
		return true
	case s.Field == shard.ByNamespace:
		return s.Owns(req.Namespace)
	}
	_, err := p.reader.Get(ctx, p.forGVK, req.Namespace, req.Name)
	return err == nil
}

// Held are the plugin's units this replica holds, when it shares plugins with other replicas
// (Host.Share): the plugin's name, or its shards' ("name/0"); nil otherwise.
func (p *Plugin) Held() []string { return p.share.holding() }

// shared runs a plugin on the replicas that share it: its controller runs while this replica
// holds any of the plugin's units, with the shards it holds, and stops before a unit it lets
// go of is handed back.
type shared struct {
	p     *Plugin
	ctrl  *crdwatch.Following
	table *ownership.Table
	log   logr.Logger
}

func (s *shared) Name() string             { return s.p.cfg.Name + " (shared)" }
func (s *shared) NeedLeaderElection() bool { return false }

func (s *shared) Start(ctx context.Context) error {
	units := s.p.Units()
	var claim *ownership.Claim
	for {
		var err error
		if claim, err = s.table.Claim(units...); err == nil {
			break
		}
		// The plugin this one replaces (a reload) has not let go of its units yet.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer claim.Close()
	s.p.share.setClaim(claim)
	defer s.p.share.dropClaim(claim)
	stop := s.report(ctx, claim)
	defer stop()
	if s.p.cfg.Shards > 1 {
		s.log.Info("sharing the plugin's shards with the other replicas", "shards", s.p.cfg.Shards)
	}
	// A plugin's failure is its own: it is said and the plugin's run starts again after a
	// backoff, never returned to the manager, which would stop the host for every plugin.
	restarts := backoff.Restart.Start()
	for {
		err := claim.Run(ctx, func(ctx context.Context, held []string) error {
			s.p.runShards(held)
			return s.ctrl.Start(ctx)
		})
		if ctx.Err() != nil {
			return nil
		}
		delay := restarts.Next()
		s.log.Error(err, "the plugin's run failed; starting it again after a backoff", "backoff", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// report keeps the ownership gauge of the plugin's units up to date until stopped, then
// forgets them.
func (s *shared) report(ctx context.Context, claim *ownership.Claim) (stop func()) {
	var g *prometheus.GaugeVec
	if m := s.p.host.metrics; m != nil {
		g = m.ShardOwned
	}
	label := func(u string) string { // the shard as "1/3", "" for a plugin not split
		if _, i, ok := shard.SplitUnit(u); ok {
			return shard.Shard{Index: i, Count: s.p.cfg.Shards}.String()
		}
		return ""
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			st, changed := claim.State()
			if s.p.share.setUnits(st.Held, st.Standby) {
				if s.p.host.warmStandby && len(st.Standby) > 0 {
					s.log.Info("keeping warm what this replica would take over first", "units", st.Standby)
				}
				if err := s.p.warm.update(); err != nil {
					s.log.Error(err, "keeping the informers of the shards this replica stands by for")
				}
			}
			for _, u := range s.p.Units() {
				v := 0.0
				if slices.Contains(st.Held, u) {
					v = 1
				}
				if g != nil {
					g.WithLabelValues(s.p.cfg.Name, label(u)).Set(v)
				}
			}
			if s.p.cfg.Hooks.OnRunning != nil {
				s.p.cfg.Hooks.OnRunning(s.p.Running()) // the held units are reported with the running state
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		s.p.share.stopHolding()
		for _, u := range s.p.Units() {
			if g != nil {
				g.DeleteLabelValues(s.p.cfg.Name, label(u))
			}
		}
	}
}

// shareState is a plugin's part of the work when replicas share plugins (Host.Share), under one
// lock: its claim on its units, the units it holds and those it stands by for, and the shards
// its controller runs and is to run.
type shareState struct {
	mu sync.Mutex
	// claim is the plugin's units' claim while this replica shares plugins: its reconciles and
	// writes go on only while it is Fresh.
	claim *ownership.Claim
	held  []string // see Plugin.Held
	// standby are the units this replica would take over first; nil until first said.
	standby []string
	said    bool
	// current are the shards the controller runs (nil: the plugin is not split); want those
	// it is to run from its next start, if wanted.
	current *informers.Sharding
	want    []int
	wanted  bool
}

func (s *shareState) setClaim(c *ownership.Claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claim = c
}

// dropClaim forgets c, unless another claim took its place.
func (s *shareState) dropClaim(c *ownership.Claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claim == c {
		s.claim = nil
	}
}

// fresh says whether this replica may act for the plugin now: always, unless it shares plugins
// and its hold on the plugin's units has gone stale (see ownership.Claim.Fresh).
func (s *shareState) fresh() bool {
	s.mu.Lock()
	c := s.claim
	s.mu.Unlock()
	return c == nil || c.Fresh()
}

// setUnits records the units held and stood by for, and says whether the latter changed.
func (s *shareState) setUnits(held, standby []string) (standbyChanged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = held
	changed := !s.said || !slices.Equal(s.standby, standby)
	s.standby, s.said = standby, true
	return changed
}

// stopHolding says the plugin holds no unit, as it no longer runs shared.
func (s *shareState) stopHolding() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = nil
}

func (s *shareState) holding() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *shareState) standingBy() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.standby
}

// runNext sets the shards to run from the controller's next start.
func (s *shareState) runNext(shards []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want, s.wanted = shards, true
}

// next are the shards to run from the controller's next start, if set.
func (s *shareState) next() ([]int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want, s.wanted
}

// setRunning records the shards the controller runs (none if next does not split).
func (s *shareState) setRunning(next informers.Sharding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if next.Count <= 1 {
		s.current = nil
		return
	}
	s.current = &next
}

// running are the shards the controller runs; the zero Sharding if the plugin is not split.
func (s *shareState) running() informers.Sharding {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return informers.Sharding{}
	}
	return *s.current
}
