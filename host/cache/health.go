package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/internal/backoff"
)

// watchList is the verb of a watch that sends the initial events: the informer's list, with
// client-go's WatchListClient (on by default). When it fails, the reflector lists instead.
const watchList = "watch-list"

// patiently makes a list or watch call (verb), and while it fails for want of the API server (a
// transport error, 429 or 5xx), makes it again on the backoff.Outage schedule until it works or
// ctx ends; the reflector then never backs off for an outage. Other errors (forbidden, gone...)
// are the reflector's to handle; a refusal (403, 401) is recorded here, where the verb is known,
// except a watch-list's: the list the reflector falls back to says whether the list is refused.
func (h *health) patiently(ctx context.Context, log logr.Logger, host, verb string, call func() error) error {
	b := backoff.Outage.Start()
	for {
		err := call()
		if err == nil {
			h.recovered(log, verb)
			return nil
		}
		if IsRefused(err) && ctx.Err() == nil {
			if verb != watchList {
				h.failed(log, host, verb, err)
			}
			return err
		}
		if !isOutage(err) || ctx.Err() != nil {
			return err
		}
		h.failed(log, host, verb, err)
		if !b.Wait(ctx) {
			return err
		}
	}
}

// isOutage tells whether err says the API server could not serve the call at all.
func isOutage(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// IsRefused tells whether err is the API server refusing the host's identity a call: 403
// Forbidden (RBAC) or 401 Unauthorized (credentials). Waiting does not help; a grant does.
func IsRefused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// health follows whether an informer's list and watch calls work. It says when they start
// failing (once, not at every retry), when the failure turns from an outage into a refusal or
// back, and when they work again; and tells notify each time.
type health struct {
	key      Key
	resource schema.GroupVersionResource
	notify   func()

	listRefused atomic.Bool // the list is refused now: the fast path of Informer.Refused

	mu      sync.Mutex
	failing bool
	since   time.Time
	err     error
	verb    string        // the call that failed last: "list" or "watch" ("" if the reflector said so)
	refused chan struct{} // closed while the list is refused; a new one once it works again
}

func newHealth(key Key, resource schema.GroupVersionResource, notify func()) *health {
	return &health{key: key, resource: resource, notify: notify, refused: make(chan struct{})}
}

// failed records a failed list or watch (verb; "" when the reflector reports it).
func (h *health) failed(log logr.Logger, host, verb string, err error) {
	refused := IsRefused(err)
	if verb == watchList {
		verb = "watch"
	}
	h.mu.Lock()
	wasFailing, wasRefused, oldVerb := h.failing, h.failing && IsRefused(h.err), h.verb
	h.err = err
	if verb != "" && !(refused && verb == "watch" && h.listRefused.Load()) { // a refused list says more
		h.verb = verb
	}
	if !h.failing {
		h.failing, h.since = true, time.Now()
	}
	if refused && verb == "list" && !h.listRefused.Load() {
		h.listRefused.Store(true) // before the close: a waiter woken by it reads Refused at once
		close(h.refused)
	}
	since, f := h.since, h.failureLocked()
	h.mu.Unlock()
	switch {
	case wasFailing && wasRefused == refused:
		log.V(1).Info("list/watch still failing", "for", time.Since(since).Round(time.Second), "err", err.Error())
		if refused && oldVerb != f.Verb {
			h.notify() // a list refused now, where it was the watch (or the other way)
		}
		return
	case refused:
		log.Error(err, f.Missing()+"; the informer retries meanwhile", "server", host)
	default:
		log.Error(err, "list/watch failing; the informer retries, and the host is not ready meanwhile: check that the API server is reachable", "server", host)
	}
	h.notify()
}

// recovered records a list or watch call (verb) that worked: it ends a failure, unless the
// watch is refused and this was a list (an informer that may list but not watch syncs, and
// then lists again and again).
func (h *health) recovered(log logr.Logger, verb string) {
	h.mu.Lock()
	if !h.failing || (IsRefused(h.err) && h.verb == "watch" && verb == "list") {
		h.mu.Unlock()
		return
	}
	since := h.since
	h.failing, h.err, h.verb = false, nil, ""
	if h.listRefused.Load() {
		h.refused = make(chan struct{})
		h.listRefused.Store(false)
	}
	h.mu.Unlock()
	log.Info("list/watch works again", "after", time.Since(since).Round(time.Millisecond))
	h.notify()
}

// failureLocked is the failure recorded; h.mu must be held and h.failing true.
func (h *health) failureLocked() Failure {
	return Failure{Key: h.key, Resource: h.resource, Verb: h.verb, Since: h.since, Err: h.err}
}

// Failure is an informer whose list/watch fails.
type Failure struct {
	Key Key
	// Resource is what the informer lists and watches.
	Resource schema.GroupVersionResource
	// Verb is the call that failed last, "list" or "watch"; "" if only the informer's reflector
	// said so.
	Verb  string
	Since time.Time
	Err   error
}

// Refused tells whether the API server refuses the host's identity the list or watch (403
// Forbidden, 401 Unauthorized): something to grant, not an outage to wait out.
func (f Failure) Refused() bool { return IsRefused(f.Err) }

// Missing says, of a refused failure, what the host lacks and what to do: "the host cannot list
// core/secrets in prod: grant its ServiceAccount list and watch on them". The API server's own
// message (f.Err) names the identity it refused.
func (f Failure) Missing() string {
	verb, what := cmp.Or(f.Verb, "list and watch"), cmp.Or(f.Resource.Group, "core")+"/"+f.Resource.Resource
	where := "cluster-wide"
	if f.Key.Namespace != "" {
		where = "in " + f.Key.Namespace
	}
	if apierrors.IsUnauthorized(f.Err) {
		return fmt.Sprintf("the API server does not take the host's credentials to %s %s %s: check its kubeconfig, token or certificate", verb, what, where)
	}
	return fmt.Sprintf("the host cannot %s %s %s: grant its ServiceAccount list and watch on them", verb, what, where)
}

// RefusedError is an informer whose list the API server refuses the host's identity (403
// Forbidden, 401 Unauthorized): it cannot sync until that is granted.
type RefusedError struct{ Failure Failure }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s (%v)", e.Failure.Missing(), e.Failure.Err)
}

func (e *RefusedError) Unwrap() error { return e.Failure.Err }

// Failures lists the informers whose list/watch fails now, for readiness and metrics.
func (c *Cache) Failures() []Failure {
	c.mu.Lock()
	entries := make([]*entry, 0, len(c.informers))
	for _, e := range c.informers {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	var out []Failure
	for _, e := range entries {
		e.health.mu.Lock()
		if e.health.failing {
			out = append(out, e.health.failureLocked())
		}
		e.health.mu.Unlock()
	}
	return out
}

// OnHealthChange has fn told the key of each informer that starts or stops failing, or whose
// failure changes (an outage turned refusal, a refused watch turned refused list...). fn is
// called from the cache's own goroutine while the cache runs, never from an informer's, so it
// may take locks held while informers are released; changes that come in quick succession may
// be told once. Call it before Start.
func (c *Cache) OnHealthChange(fn func(Key)) {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	c.watchers = append(c.watchers, fn)
}

// healthChanged queues key for tellHealth.
func (c *Cache) healthChanged(key Key) {
	c.healthMu.Lock()
	c.changed[key] = true
	c.healthMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// tellHealth tells the OnHealthChange watchers of the informers whose health changed, until ctx
// is done.
func (c *Cache) tellHealth(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		c.healthMu.Lock()
		changed, watchers := c.changed, slices.Clone(c.watchers)
		c.changed = map[Key]bool{}
		c.healthMu.Unlock()
		for key := range changed {
			for _, fn := range watchers {
				fn(key)
			}
		}
	}
}
