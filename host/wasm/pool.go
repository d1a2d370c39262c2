package wasm

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Instances returns the number of idle instances and their total memory in bytes.
func (m *Module) Instances() (idle int, memory uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, inst := range m.idle {
		memory += uint64(inst.mem.Size())
	}
	return len(m.idle), memory
}

// Retire takes the module out of service but keeps it compiled: new reconciles get ErrClosed,
// Retire waits (at most until ctx ends) for checked-out instances to come back, and closes the
// idle ones. Reactivate puts it back in service at the cost of new instances only.
func (m *Module) Retire(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	var waitErr error
	taken := 0
	for range cap(m.tokens) {
		select {
		case <-m.tokens:
			taken++
			continue
		case <-ctx.Done():
			waitErr = fmt.Errorf("plugin %q: retiring with reconciles still running: %w", m.opts.Name, context.Cause(ctx))
		}
		break
	}
	m.mu.Lock()
	idle := m.idle
	m.idle = nil
	if m.shrink != nil {
		m.shrink.Stop()
		m.shrink = nil
	}
	m.mu.Unlock()
	for _, inst := range idle {
		m.drop(context.WithoutCancel(ctx), inst)
	}
	for range taken {
		m.tokens <- struct{}{}
	}
	return waitErr
}

// Reactivate puts a retired module back in service.
func (m *Module) Reactivate() {
	m.mu.Lock()
	m.closed = false
	m.mu.Unlock()
}

// get checks out an instance, creating one if the pool has room and none is idle.
func (m *Module) get(ctx context.Context) (*instance, error) {
	select {
	case <-m.tokens:
	case <-ctx.Done():
		return nil, fmt.Errorf("plugin %q: waiting for a free instance: %w", m.opts.Name, context.Cause(ctx))
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.tokens <- struct{}{}
		return nil, fmt.Errorf("plugin %q: %w", m.opts.Name, ErrClosed)
	}
	if n := len(m.idle); n > 0 {
		inst := m.idle[n-1]
		m.idle = m.idle[:n-1]
		m.mu.Unlock()
		return inst, nil
	}
	m.mu.Unlock()
	inst, err := m.newInstance(context.WithoutCancel(ctx), nil)
	if err != nil {
		m.tokens <- struct{}{}
		return nil, err
	}
	return inst, nil
}

// put returns an instance: healthy ones go back to the pool unless their memory grew past the
// recycle bound, the others are closed.
func (m *Module) put(inst *instance, healthy bool) {
	defer func() { m.tokens <- struct{}{} }()
	if healthy && uint64(inst.mem.Size()) > m.opts.RecycleAbove {
		m.stats.recycled.Add(1)
		m.opts.Logger.V(1).Info("replacing an instance whose memory grew past the recycle bound", "memory", inst.mem.Size(), "bound", m.opts.RecycleAbove)
		healthy = false
	} else if healthy && inst.recycle {
		m.stats.recycled.Add(1)
		m.opts.Logger.V(1).Info("replacing an instance whose recorded steps passed their bound", "bytes", inst.lineageBytes, "bound", MaxLineage)
		healthy = false
	} else if !healthy {
		m.stats.discarded.Add(1)
	}
	m.mu.Lock()
	closed := m.closed
	if healthy && !closed {
		inst.idleSince = time.Now()
		m.idle = append(m.idle, inst)
		if m.opts.IdleTimeout > 0 && m.shrink == nil {
			m.shrink = time.AfterFunc(m.opts.IdleTimeout, m.closeIdle)
		}
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.drop(context.Background(), inst)
	// An instance thrown away can leave the pool empty, as closing idle ones does: the code's
	// idle time starts then (its timer was stopped when the instance was made).
	m.mu.Lock()
	if len(m.idle) == 0 && m.stats.live.Load() == 0 {
		m.armCodeUnload()
	}
	m.mu.Unlock()
}

// closeIdle closes the instances idle for IdleTimeout or longer, and arms itself again for the
// next to be, if any. Their memory goes back to the OS as they close (linearmem): an idle
// plugin costs its compiled code, not its heaps.
func (m *Module) closeIdle() {
	m.mu.Lock()
	now := time.Now()
	n := 0
	for n < len(m.idle) && now.Sub(m.idle[n].idleSince) >= m.opts.IdleTimeout {
		n++
	}
	expired := slices.Clone(m.idle[:n])
	m.idle = slices.Delete(m.idle, 0, n)
	m.shrink = nil
	if len(m.idle) > 0 {
		m.shrink = time.AfterFunc(m.opts.IdleTimeout-now.Sub(m.idle[0].idleSince), m.closeIdle)
	} else {
		m.armCodeUnload()
	}
	m.mu.Unlock()
	for _, inst := range expired {
		m.stats.idleClosed.Add(1)
		m.drop(context.Background(), inst)
	}
	if len(expired) > 0 {
		m.opts.Logger.V(1).Info("closed instances idle past the idle timeout", "instances", len(expired), "idleTimeout", m.opts.IdleTimeout.String())
	}
}

// drop closes inst, which no call runs on; its memory is unmapped (linearmem).
func (m *Module) drop(ctx context.Context, inst *instance) {
	m.stats.live.Add(-1)
	_ = inst.mod.Close(ctx)
}
