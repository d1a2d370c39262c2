package pluginobjects

import (
	"sync"
	"time"

	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/internal/backoff"
)

// objectRun is the plugin one object runs, under its supervisor: what the object's reconciles
// and its plugin's hooks (from other goroutines) know of it. Its budget fields are the
// resources' and change under their lock (see budget.go); the rest under its own, which no
// other lock is taken under.
type objectRun struct {
	req      reconcile.Request // its object
	sup      *plugin.Supervisor
	settings string // the spec without module and paused: a change starts it anew
	module   string // the module it was started with

	// Under resources.mu.
	memory    int64  // its instances' share of the memory budget
	code      int64  // its compiled modules' share (codeBudget)
	units     int    // its share of the unit budget: its shards, or 1
	namespace string // a Plugin's, for the namespace's budget

	mu        sync.Mutex
	announced bool   // the Loaded event was recorded
	shown     string // the last load failure said, so that it is said once
	lastErr   string // the last refusal or fetch failure of a swap, cleared by a good swap
	lastWhy   string // its reason: SwapRefused, FetchFailed, OverBudget or a rollout's stage
	swaps     int64
	refusals  int64
	tried     string            // the last module a swap failed to, its retries, and when the
	retries   *backoff.Schedule // next is due: a module refused or out of reach is tried again on
	due       time.Time         // the backoff.ModuleFetch schedule, not on every reconcile
}

// announce says whether the plugin's load is news (its Loaded event not recorded yet), and
// forgets the load failures said before it.
func (l *objectRun) announce() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	news := !l.announced
	l.announced, l.shown = true, ""
	return news
}

// notLoaded records why the plugin is not loaded (reason, msg), and says whether that is news;
// a refusal not said before counts as one.
func (l *objectRun) notLoaded(reason, msg string) (failure, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	news := l.shown != msg
	l.shown = msg
	if news && reason == plugin.ReasonRefused {
		l.refusals++
	}
	return failure{reason: reason, msg: msg, refusals: l.refusals}, news
}

// moveTo is how long a move to module must wait: a move that failed before waits its backoff.
func (l *objectRun) moveTo(module string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tried != module {
		l.tried, l.retries, l.due = module, backoff.ModuleFetch.Start(), time.Time{}
	}
	return time.Until(l.due)
}

// moveFailed records a failed move and when the next is due; a failure other than a refusal
// (which the plugin's OnSwap records) is recorded as why, and said if it is news.
func (l *objectRun) moveFailed(err error, why string) (delay time.Duration, news bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delay = l.retries.Next()
	l.due = time.Now().Add(delay)
	if why == "" {
		return delay, false
	}
	news = l.lastErr != err.Error()
	l.lastErr, l.lastWhy = err.Error(), why
	return delay, news
}

// moveDone records that the move to spec.module is done.
func (l *objectRun) moveDone() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tried, l.lastErr, l.lastWhy = "", "", ""
}

// moveOver records that spec.module serves: a failed move to another module is over.
func (l *objectRun) moveOver() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tried != "" {
		l.tried, l.lastErr, l.lastWhy = "", "", ""
	}
}

// swapped records a swap's outcome, whoever triggered it.
func (l *objectRun) swapped(s plugin.SwapEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case s.Err != nil && s.NotNow:
		l.lastErr, l.lastWhy = s.Err.Error()+" (the module serving serves on; the new one is tried again at each poll of its tag, or every 10 s for a file)", "SwapWaiting"
	case s.Err != nil:
		l.lastErr, l.lastWhy = s.Err.Error(), "SwapRefused"
		l.refusals++
	case s.Unchanged:
		if l.lastWhy == "SwapRefused" || l.lastWhy == "SwapWaiting" {
			l.lastErr, l.lastWhy = "", ""
		}
	default:
		l.lastErr, l.lastWhy = "", ""
		l.swaps++
	}
}

// failed records that spec.module's version does not serve, and why.
func (l *objectRun) failed(msg, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr, l.lastWhy = msg, why
}

// serving is what the status says of the plugin's swaps.
func (l *objectRun) serving() serving {
	l.mu.Lock()
	defer l.mu.Unlock()
	return serving{swaps: l.swaps, refusals: l.refusals, lastErr: l.lastErr, lastWhy: l.lastWhy, next: l.due}
}

// waitForRoom says whether a move to a new module waits for room in the budgets, and if so has
// it tried again at the next reconcile.
func (l *objectRun) waitForRoom() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastWhy != plugin.ReasonOverBudget {
		return false
	}
	l.due = time.Time{}
	return true
}

// waiting says whether the plugin is not loaded yet: its supervisor tries again.
func (l *objectRun) waiting() bool { return l.sup != nil && l.sup.State().Plugin == nil }
