package crdwatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/internal/backoff"
)

// Follow returns a runnable that runs r only while every kind in kinds is served: it waits for
// them, starts r, stops r (cancelling its context and waiting for it) when one goes away, and
// starts it again when all are back. r must be restartable. If r fails, Follow logs it and
// starts it again after a backoff (backoff.Restart: 1s doubling to 1m): one plugin's failure does not stop the
// host. onState, if not nil, is told when r starts (true) and when it stops or waits (false).
func Follow(w *Watcher, kinds []schema.GroupVersionKind, r manager.Runnable, log logr.Logger, onState func(running bool)) *Following {
	return &Following{w: w, kinds: kinds, inner: r, log: log, wake: make(chan struct{}, 1), onState: onState}
}

// Following is a runnable that follows its kinds' CRDs.
type Following struct {
	w     *Watcher
	mu    sync.Mutex
	kinds []schema.GroupVersionKind
	inner manager.Runnable
	log   logr.Logger
	wake  chan struct{} // SetKinds changed the kinds

	onState func(running bool) // see Follow
}

func (f *Following) state(running bool) {
	if f.onState != nil {
		f.onState(running)
	}
}

var _ manager.LeaderElectionRunnable = (*Following)(nil)

// NeedLeaderElection is the wrapped runnable's.
func (f *Following) NeedLeaderElection() bool {
	if le, ok := f.inner.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

// Name names the wrapped runnable.
func (f *Following) Name() string {
	if n, ok := f.inner.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", f.inner)
}

// SetKinds changes the kinds followed from now on. A runnable waiting for a kind no longer
// among them starts if the rest are served; a running one stops if a new kind is not.
func (f *Following) SetKinds(kinds []schema.GroupVersionKind) {
	f.mu.Lock()
	f.kinds = kinds
	f.mu.Unlock()
	f.poke()
}

// poke wakes Start to look at the kinds again.
func (f *Following) poke() {
	select {
	case f.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// missing lists the kinds not served now (see Watcher.NotServed).
func (f *Following) missing() []string {
	f.mu.Lock()
	kinds := f.kinds
	f.mu.Unlock()
	return f.w.NotServed(kinds)
}

// Start follows the kinds until ctx is done. It returns nil: the wrapped runnable's failures are
// logged and it is started again.
func (f *Following) Start(ctx context.Context) error {
	changes, unsubscribe := f.w.Subscribe()
	defer unsubscribe()
	select {
	case <-f.w.Synced():
	case <-ctx.Done():
		return nil
	}
	// CRD changes and SetKinds both wake the loop below.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
				f.poke()
			}
		}
	}()
	restarts := backoff.Restart.Start()
	for {
		if m := f.missing(); len(m) > 0 {
			if strings.Contains(strings.Join(m, ""), "did you mean") { // a typo, most likely: it will wait for ever
				f.log.Error(errors.New(strings.Join(m, "; ")), "waiting for a kind no API serves", "runnable", f.Name())
			} else {
				f.log.Info("waiting: not served", "runnable", f.Name(), "kinds", strings.Join(m, "; "))
			}
			for len(f.missing()) > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-f.wake:
				}
			}
		}
		f.log.Info("starting: every kind it needs is served", "runnable", f.Name())
		f.state(true)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.inner.Start(runCtx) }()
	running:
		for {
			select {
			case <-ctx.Done():
				stop()
				f.state(false)
				// Asked to stop: what the runnable returns now is an effect of that, never a
				// reason to stop the host (a permission review cut short, say). Anything but the
				// cancellation is said.
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					f.log.Error(err, "stopped", "runnable", f.Name())
				}
				return nil
			case err := <-done:
				stop()
				f.state(false)
				if err == nil {
					err = fmt.Errorf("%s stopped by itself", f.Name())
				}
				delay := restarts.Next()
				f.log.Error(err, "restarting after a backoff", "runnable", f.Name(), "backoff", delay.Round(time.Millisecond))
				t := time.NewTimer(delay)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil
				case <-t.C:
				}
				break running
			case <-f.wake:
				if m := f.missing(); len(m) > 0 {
					f.log.Info("stopping: no longer served", "runnable", f.Name(), "kinds", strings.Join(m, "; "))
					stop()
					if err := <-done; err != nil {
						f.log.Error(err, "stopping", "runnable", f.Name())
					}
					f.state(false)
					restarts.Reset()
					break running
				}
			}
		}
	}
}
