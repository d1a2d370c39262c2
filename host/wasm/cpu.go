package wasm

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/semaphore"
)

// ErrThrottled is a reconcile that found no CPU slot of its CPUShare before its deadline.
var ErrThrottled = errors.New("no CPU slot free before the reconcile's deadline")

// CPUShare is a number of cores that the guests of the modules given it share: at most that
// many of them execute at once, each on one core at most, so that those modules together never
// take more of the host. A reconcile holds a slot from before it takes an instance until its
// guest returns (its host calls included), and waits for one within its own deadline. A
// namespace's Plugins share one (pluginObjects.namespaceCPU): a tenant's looping guests take
// her share of the host, not her neighbours'.
type CPUShare struct {
	name  string // what it is the share of, for errors: "the Plugins of team-a"
	slots int64
	sem   *semaphore.Weighted
}

// NewCPUShare returns a share of slots cores (at least 1), named for errors.
func NewCPUShare(name string, slots int) *CPUShare {
	n := int64(max(slots, 1))
	return &CPUShare{name: name, slots: n, sem: semaphore.NewWeighted(n)}
}

// Slots is the number of cores shared.
func (s *CPUShare) Slots() int { return int(s.slots) }

func (s *CPUShare) acquire(ctx context.Context) error {
	if s.sem.TryAcquire(1) {
		return nil
	}
	if err := s.sem.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("%w: %s run %d guests at most at once, and theirs were busy: %w", ErrThrottled, s.name, s.slots, err)
	}
	return nil
}

func (s *CPUShare) release() { s.sem.Release(1) }
