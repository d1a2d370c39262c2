package backoff

import (
	"context"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Policy is a retry schedule: the first delay, doubled after each failure up to Max, each
// delay spread by up to Jitter of itself so that replicas and plugins do not retry in step.
type Policy struct {
	Initial, Max time.Duration
	Jitter       float64
}

// The schedules.
var (
	// ModuleFetch paces a module that could not be had (a file not there yet, a registry that
	// is down): 1 s doubling to 5 min.
	ModuleFetch = Policy{Initial: time.Second, Max: 5 * time.Minute, Jitter: 0.1}
	// TagPoll paces a registry tag that cannot be resolved: it starts at the poll interval
	// (see Policy.From) and doubles to 5 min, or to the interval if that is longer.
	TagPoll = Policy{Max: 5 * time.Minute, Jitter: 0.1}
	// Restart paces a runnable that stopped by itself: 1 s doubling to 1 min.
	Restart = Policy{Initial: time.Second, Max: time.Minute, Jitter: 0.1}
	// Outage paces an informer's list and watch while the API server cannot be reached: 250 ms
	// doubling to 2 s. It stays short so that a change made after an outage is seen within
	// seconds (the reflector's own backoff grows to 30-60 s).
	Outage = Policy{Initial: 250 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.2}
)

// From returns the policy starting at initial (and capped at no less than it).
func (p Policy) From(initial time.Duration) Policy {
	p.Initial, p.Max = initial, max(p.Max, initial)
	return p
}

// Start returns a fresh schedule of the policy.
func (p Policy) Start() *Schedule {
	s := &Schedule{policy: p}
	s.Reset()
	return s
}

// Schedule is one loop's retry delays. It is not safe for concurrent use.
type Schedule struct {
	policy Policy
	b      wait.Backoff
	last   time.Duration
}

// Reset starts the schedule again at its first delay: call it after a success.
func (s *Schedule) Reset() {
	p := s.policy
	s.b = wait.Backoff{Duration: p.Initial, Factor: 2, Jitter: p.Jitter, Steps: math.MaxInt32, Cap: p.Max}
	s.last = 0
}

// Next returns the delay before the next attempt and moves the schedule on.
func (s *Schedule) Next() time.Duration {
	s.last = s.b.Step()
	return s.last
}

// Last returns the delay Next last returned (0 before the first).
func (s *Schedule) Last() time.Duration { return s.last }

// Wait waits the next delay; false if ctx ended first.
func (s *Schedule) Wait(ctx context.Context) bool {
	t := time.NewTimer(s.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
