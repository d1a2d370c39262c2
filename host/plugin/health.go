package plugin

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// Unavailable lists, one line each, what the plugin needs that the host cannot list or watch:
// the informers of the kinds it watches, or has read since its controller started, whose list
// or watch the API server refuses the host's own identity (403 Forbidden, 401 Unauthorized),
// each with what is missing and what to do, then the API server's words:
//
//	the host cannot list core/secrets in prod: grant its ServiceAccount list and watch on them (secrets is forbidden: User "..." cannot list ...)
//
// It is empty while they all work, or fail only because the API server cannot be reached (the
// host's readiness reports that: Host.NotReady). While a line is there the plugin's reads of
// that kind fail at once with forbidden, and its controller waits for a watched kind's first
// list; the other plugins and the host's readiness are not affected. The code that writes a
// plugin's status sets Degraded from it; OnUnavailable says when it changes.
func (p *Plugin) Unavailable() []string {
	return linesOf(p.refusals())
}

// pluginHealth is what the log and OnUnavailable were last told of a plugin's refused informers.
type pluginHealth struct {
	mu    sync.Mutex
	said  map[subject]bool // said in the log to be refused
	lines []string         // Unavailable, as OnUnavailable was last told
}

// subject is what one line of Unavailable is about: a resource in a namespace ("" for the
// cluster). The informers of one subject (metadata only or full, one per shard) make one line.
type subject struct {
	resource  schema.GroupResource
	namespace string
}

func subjectOf(f cache.Failure) subject {
	return subject{resource: f.Resource.GroupResource(), namespace: f.Key.Namespace}
}

func linesOf(refusals []cache.Failure) []string {
	lines := make([]string, 0, len(refusals))
	for _, f := range refusals {
		lines = append(lines, (&cache.RefusedError{Failure: f}).Error())
	}
	return lines
}

// needs are the informers the plugin uses: those of its watches, and every one it holds (its
// sources', on a warm standby those of what it would take over, and those its reads have
// acquired since its controller started).
func (p *Plugin) needs() []cache.Key {
	keys := p.currentKeys()
	if p.infs != nil {
		keys = append(keys, p.infs.Keys()...)
	}
	return keys
}

// refusals are the failures of the informers the plugin needs that the API server refuses the
// host, one per subject (a refused list before a refused watch), in a stable order.
func (p *Plugin) refusals() []cache.Failure {
	needed := map[cache.Key]bool{}
	for _, k := range p.needs() {
		needed[k] = true
	}
	var refused []cache.Failure
	for _, f := range p.host.mgr.GetCache().Failures() {
		if f.Refused() && needed[f.Key] {
			refused = append(refused, f)
		}
	}
	slices.SortFunc(refused, func(a, b cache.Failure) int {
		return cmp.Or(
			strings.Compare(a.Resource.String(), b.Resource.String()),
			strings.Compare(a.Key.Namespace, b.Key.Namespace),
			strings.Compare(a.Verb, b.Verb), // list before watch
			strings.Compare(a.Key.String(), b.Key.String()),
		)
	})
	return slices.CompactFunc(refused, func(a, b cache.Failure) bool { return subjectOf(a) == subjectOf(b) })
}

// checkHealth says in the log, once per resource and namespace, what the plugin newly cannot
// have (at ERROR) and what it has again, and tells OnUnavailable when Unavailable changed.
func (p *Plugin) checkHealth() {
	if p.isClosed() {
		return
	}
	h := &p.health
	h.mu.Lock()
	defer h.mu.Unlock()
	refusals := p.refusals()
	now := make(map[subject]bool, len(refusals))
	for _, f := range refusals {
		s := subjectOf(f)
		now[s] = true
		if !h.said[s] {
			p.log.Error(f.Err, f.Missing()+"; until then the plugin's reads of them fail at once and its watches of them wait (the other plugins and the host's readiness are not affected)",
				"kind", kinds.GVK(f.Key.GroupVersionKind))
		}
	}
	for _, s := range slices.SortedFunc(maps.Keys(h.said), func(a, b subject) int {
		return strings.Compare(a.resource.String()+a.namespace, b.resource.String()+b.namespace)
	}) {
		if !now[s] {
			p.log.Info("the host can list and watch what the plugin needs again", "resource", s.resource.String(), "namespace", s.namespace)
		}
	}
	h.said = now
	lines := linesOf(refusals)
	if slices.Equal(lines, h.lines) {
		return
	}
	h.lines = lines
	if p.cfg.Hooks.OnUnavailable != nil {
		p.cfg.Hooks.OnUnavailable(slices.Clone(lines))
	}
}

// saysUnavailable tells whether the plugin was last said to lack something.
func (p *Plugin) saysUnavailable() bool {
	p.health.mu.Lock()
	defer p.health.mu.Unlock()
	return len(p.health.said) > 0
}

// healthChanged looks again at the plugins that need the informer of key, or were said to lack
// something (see cache.Cache.OnHealthChange).
func (h *Host) healthChanged(key cache.Key) {
	for _, p := range h.livePlugins() {
		if p.saysUnavailable() || slices.Contains(p.needs(), key) {
			p.checkHealth()
		}
	}
}

// livePlugins are the plugins loaded and not closed.
func (h *Host) livePlugins() []*Plugin {
	h.namesMu.Lock()
	defer h.namesMu.Unlock()
	out := make([]*Plugin, 0, len(h.loaded))
	for p := range h.loaded {
		if !p.isClosed() {
			out = append(out, p)
		}
	}
	return out
}

// NotReady says why the host as a whole is not ready, one reason a line; none when it is. It is
// the rule of the host's readiness probe (/readyz). started tells whether the host's caches have
// synced and every plugin of its config has loaded or been refused.
//
// The host is not ready until started, nor while an informer's list or watch fails for a reason
// that concerns the whole host: the API server cannot be reached or is overloaded (a transport
// error, 429, 5xx), or it refuses (403, 401) an informer no plugin needs: the host's own (CRDs,
// Plugin objects). An informer the API server refuses that a plugin needs concerns that plugin
// alone: it is Degraded (see Plugin.Unavailable), and the host stays ready. A replica's readiness
// decides whether it gets traffic and whether a rollout goes on; every replica shares the host's
// ServiceAccount, so a kind it may not list would hold every replica unready and stop rollouts
// for all plugins, without any replica being able to do better.
func (h *Host) NotReady(started bool) []string {
	needed := map[cache.Key]bool{}
	for _, p := range h.livePlugins() {
		for _, k := range p.needs() {
			needed[k] = true
		}
	}
	return notReady(started, h.mgr.GetCache().Failures(), needed, time.Now())
}

// notReady is NotReady's rule over the cache's failures and the informers plugins need.
func notReady(started bool, failures []cache.Failure, pluginsNeed map[cache.Key]bool, now time.Time) []string {
	if !started {
		return []string{"caches syncing or plugins loading"}
	}
	var out []string
	for _, f := range failures {
		switch {
		case f.Refused() && pluginsNeed[f.Key]:
			continue // that plugin's: Unavailable
		case f.Refused():
			out = append(out, fmt.Sprintf("list/watch of %s refused for %s: %v", f.Key, now.Sub(f.Since).Round(time.Second), &cache.RefusedError{Failure: f}))
		default:
			out = append(out, fmt.Sprintf("list/watch of %s failing for %s: %v", f.Key, now.Sub(f.Since).Round(time.Second), f.Err))
		}
	}
	slices.Sort(out)
	return out
}

// FailingAfter is how many reconciles in a row must fail, with none succeeding, before Failing
// says the plugin is failing: one failure is a conflict or a missing object soon put right;
// five in a row, the first few retries of one key apart, are a plugin that does not work.
const FailingAfter = 5

// Failing says, once FailingAfter reconciles in a row have failed (errors, panics, timeouts),
// or FailingAfter maps of watched objects by its map function, that the plugin is failing,
// with the last error; "" again from the next reconcile (or map) that succeeds. The code that
// writes a plugin's status sets Degraded from it; OnFailing says when it changes.
func (p *Plugin) Failing() string {
	return strings.Join(slices.DeleteFunc([]string{p.failures.message(), p.mapFailures.message()}, func(s string) bool { return s == "" }), "; ")
}

// IndexRefused says, while the memory budget refuses the serving version's field index a
// charge, what that means and what makes room; "" while the index keeps values, or has none.
// The code that writes a plugin's status sets Degraded from it; OnIndexRefused says when it
// changes.
func (p *Plugin) IndexRefused() string {
	refusal := p.current.Load().index.Refused()
	if refusal == nil {
		return ""
	}
	return "the memory budget has no room for the values of its field indexes: the host keeps none, so each list hands the plugin every item, which it tests itself (as right, slower); the next list that tells values tries again. The budget said: " + refusal.Error()
}

// onFailing tells the OnFailing hook, if set, what Failing says now: a streak changed.
func (p *Plugin) onFailing(string) {
	if f := p.cfg.Hooks.OnFailing; f != nil {
		f(p.Failing())
	}
}

// failureStreak counts a plugin's reconciles (or maps) failed since the last one that
// succeeded.
type failureStreak struct {
	what   string // what fails, in the message: "" is "reconcile"
	mu     sync.Mutex
	n      int
	since  time.Time // when the first of them failed
	last   string    // the last one's error, its first line
	told   string    // the last error onChange was told of
	toldAt time.Time
	later  *time.Timer // tells a last error that came within failingRetell of toldAt, once it has passed
}

// failingRetell is how often at most a plugin that goes on failing has its status told a new
// last error: often enough to follow an author's edits, rarely enough that a plugin failing on
// thousands of keys does not write its status for each. A last error that comes sooner is told
// once failingRetell has passed, so that the status names the latest, not an earlier one.
var failingRetell = 5 * time.Second

// maxFailingError bounds the last error Failing quotes: a condition's message must stay well
// within what the API server takes (32 KiB), or the status could never be written.
const maxFailingError = 1024

// record counts one reconcile's outcome, and tells onChange (if set), without the lock held,
// when message changes from "" or back to it, and when the last error changed since it was last
// told, at most every failingRetell (a change within it is told when it has passed).
func (f *failureStreak) record(err error, onChange func(string)) {
	f.mu.Lock()
	was := f.n >= FailingAfter
	now := time.Now()
	if err == nil {
		f.n, f.last = 0, ""
	} else {
		if f.n == 0 {
			f.since = now
		}
		f.n++
		f.last, _, _ = strings.Cut(err.Error(), "\n") // a trap's wasm stack stays in the log
		if len(f.last) > maxFailingError {            // a guest's panic message may be long
			f.last = strings.ToValidUTF8(f.last[:maxFailingError], "") + "..."
		}
	}
	failing := f.n >= FailingAfter
	tell := was != failing
	if failing && !tell && f.last != f.told {
		if wait := failingRetell - now.Sub(f.toldAt); wait <= 0 {
			tell = true
		} else if f.later == nil {
			f.later = time.AfterFunc(wait, func() { f.tellLater(onChange) })
		}
	}
	if tell {
		f.told, f.toldAt = f.last, now
	}
	f.mu.Unlock()
	if tell && onChange != nil {
		onChange(f.message())
	}
}

// tellLater tells onChange the last error, if the streak still fails with one not told.
func (f *failureStreak) tellLater(onChange func(string)) {
	f.mu.Lock()
	f.later = nil
	tell := f.n >= FailingAfter && f.last != f.told
	if tell {
		f.told, f.toldAt = f.last, time.Now()
	}
	f.mu.Unlock()
	if tell && onChange != nil {
		onChange(f.message())
	}
}

func (f *failureStreak) message() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n < FailingAfter {
		return ""
	}
	return fmt.Sprintf("every %s since %s has failed (%d or more in a row); the last error: %s", cmp.Or(f.what, "reconcile"), f.since.UTC().Format(time.RFC3339), FailingAfter, f.last)
}
