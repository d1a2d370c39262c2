package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// ErrStopping is returned by Add once the manager has begun to stop.
var ErrStopping = errors.New("manager: stopping, no new runnables are accepted")

// group is a set of runnables started and stopped together.
type group struct {
	name string
	// ready, if set, blocks until a started runnable is ready (caches: synced); false if ctx
	// ended first.
	ready func(context.Context, Runnable) bool
	// onError receives the error of a runnable that returned one on its own.
	onError func(error)

	mu       sync.Mutex
	ctx      context.Context // nil until start
	cancel   context.CancelFunc
	stopping bool
	entries  []*entry
	wg       sync.WaitGroup
}

type entry struct {
	r       Runnable
	cancel  context.CancelFunc // nil until started
	done    chan struct{}      // closed when Start has returned
	err     error              // what Start returned; read after done
	removed bool               // Remove asked it to stop: its error goes to Remove, not the manager
}

func (g *group) add(r Runnable) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopping {
		return ErrStopping
	}
	e := &entry{r: r}
	g.entries = append(g.entries, e)
	if g.ctx != nil {
		g.startLocked(e)
	}
	return nil
}

// start runs every runnable added so far, and from now on any added later, then waits until
// each is ready. It returns ctx's cause if ctx ends first.
func (g *group) start(ctx context.Context) error {
	g.mu.Lock()
	if g.ctx != nil {
		g.mu.Unlock()
		return fmt.Errorf("manager: %s group already started", g.name)
	}
	if g.stopping { // leadership won while the manager stops: start nothing
		g.mu.Unlock()
		return ErrStopping
	}
	g.ctx, g.cancel = context.WithCancel(ctx)
	started := append([]*entry(nil), g.entries...)
	for _, e := range started {
		g.startLocked(e)
	}
	g.mu.Unlock()

	if g.ready == nil {
		return nil
	}
	for _, e := range started {
		if !g.ready(ctx, e.r) {
			return fmt.Errorf("manager: waiting for %s to be ready: %w", describe(e.r), context.Cause(ctx))
		}
	}
	return nil
}

func (g *group) startLocked(e *entry) {
	ctx, cancel := context.WithCancel(g.ctx)
	e.cancel, e.done = cancel, make(chan struct{})
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(e.done)
		defer cancel()
		err := e.r.Start(ctx)
		g.mu.Lock()
		e.err = err
		removed := e.removed
		g.dropLocked(e)
		g.mu.Unlock()
		if err != nil && !removed {
			g.onError(fmt.Errorf("%s: %w", describe(e.r), err))
		}
	}()
}

func (g *group) dropLocked(e *entry) {
	for i, x := range g.entries {
		if x == e {
			g.entries = append(g.entries[:i], g.entries[i+1:]...)
			return
		}
	}
}

// remove stops r if it runs and forgets it. It reports whether r was in the group (or may have
// been: the group forgets runnables that return while it stops) and returns r's error, or ctx's
// if r did not stop in time.
func (g *group) remove(ctx context.Context, r Runnable) (bool, error) {
	g.mu.Lock()
	var e *entry
	for _, x := range g.entries {
		if x.r == r {
			e = x
			break
		}
	}
	if e == nil {
		stopping := g.stopping // a runnable that returned while the group stops is forgotten: stopped
		g.mu.Unlock()
		return stopping, nil
	}
	e.removed = true
	if e.cancel == nil { // not started: just forget it
		g.dropLocked(e)
		g.mu.Unlock()
		return true, nil
	}
	e.cancel()
	g.mu.Unlock()
	select {
	case <-e.done:
		return true, e.err
	case <-ctx.Done():
		return true, fmt.Errorf("manager: %s did not stop: %w", describe(r), context.Cause(ctx))
	}
}

// stopAndWait cancels every runnable and waits until all have returned or ctx ends; then it
// names the ones still running.
func (g *group) stopAndWait(ctx context.Context) error {
	g.mu.Lock()
	g.stopping = true
	if g.cancel != nil {
		g.cancel()
	}
	g.mu.Unlock()

	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	names := g.running()
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("manager: %d of the %s still running after the graceful-shutdown timeout: %s",
		len(names), g.name, strings.Join(names, ", "))
}

// running names the runnables started and not yet returned.
func (g *group) running() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var names []string
	for _, e := range g.entries {
		if e.cancel != nil {
			names = append(names, describe(e.r))
		}
	}
	return names
}

// describe names r for a reader of the log: by its Name, if it has one (every runnable of the
// host does), else by its Go type.
func describe(r Runnable) string {
	switch r := r.(type) {
	case interface{ Name() string }:
		return r.Name()
	case *Server:
		return "the " + r.Name + " server"
	}
	return fmt.Sprintf("%T", r)
}
