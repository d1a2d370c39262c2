package apiready

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// Interval is how often a Watcher asks the API server.
const Interval = 5 * time.Second

// Watcher asks the API server's /readyz every Interval. It is a manager Runnable that runs on
// every replica.
type Watcher struct {
	client rest.Interface
	log    logr.Logger
	every  time.Duration

	mu      sync.Mutex
	since   time.Time // when the API server was first seen not ready; zero while it is ready
	failing []string  // its checks that fail ("etcd", "etcd-readiness")
}

// New returns a Watcher of the API server client reaches, asking every interval (Interval if 0).
func New(client rest.Interface, interval time.Duration, log logr.Logger) *Watcher {
	if interval <= 0 {
		interval = Interval
	}
	return &Watcher{client: client, log: log, every: interval}
}

// NeedLeaderElection is false: every replica follows the API server.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Name names the runnable in logs.
func (w *Watcher) Name() string { return "API server readiness" }

// Start asks until ctx is done. An API server that cannot be reached says nothing here: the
// informers say that. One that refuses the host /readyz (401, 403: its RBAC took
// system:public-info-viewer away) is said once, and not asked again.
func (w *Watcher) Start(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		if !w.check(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// check asks once; false when asking is no use.
func (w *Watcher) check(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, w.every)
	defer cancel()
	var code int
	res := w.client.Get().AbsPath("/readyz").Param("verbose", "").Do(cctx).StatusCode(&code)
	body, _ := res.Raw()
	switch {
	case code == 0: // no answer: the informers' failures say it
		return true
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		w.log.Info("the API server does not let the host read its /readyz: an outage of its etcd will not be said (grant get on the non-resource URL /readyz, as system:public-info-viewer does)", "status", code)
		return false
	case code == http.StatusOK:
		w.set(nil, code)
	default:
		w.set(failed(string(body)), code)
	}
	return true
}

// failed lists the checks a verbose /readyz says fail: its "[-]etcd failed: reason withheld"
// lines.
func failed(body string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "[-]"); ok {
			name, _, _ = strings.Cut(name, " ")
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		out = []string{"unknown"}
	}
	return out
}

func (w *Watcher) set(failing []string, code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case failing == nil && !w.since.IsZero():
		w.log.Info("the API server is ready again", "after", time.Since(w.since).Round(time.Second))
		w.since, w.failing = time.Time{}, nil
	case failing != nil && w.since.IsZero():
		w.log.Error(nil, "the API server is not ready: its own checks fail; it may still serve reads from its cache, but writes fail until they pass", "failing", strings.Join(failing, ", "), "status", code)
		w.since, w.failing = time.Now(), failing
	case failing != nil:
		w.failing = failing
	}
}

// Ready reports whether the API server was ready when last asked (true before it is asked, and
// while it cannot be reached).
func (w *Watcher) Ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.since.IsZero()
}

// NotReady says why the API server is not ready, for the host's readiness; none when it is.
func (w *Watcher) NotReady(now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() {
		return nil
	}
	return []string{fmt.Sprintf("the API server is not ready for %s: %s failing", now.Sub(w.since).Round(time.Second), strings.Join(w.failing, ", "))}
}
