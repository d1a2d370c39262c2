package backoff

import (
	"context"
	"testing"
	"time"
)

func TestScheduleDoublesToItsCapAndResets(t *testing.T) {
	s := Policy{Initial: time.Second, Max: 10 * time.Second}.Start()
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i, w := range want {
		if got := s.Next(); got != w*time.Second {
			t.Fatalf("delay %d: %v, want %v", i, got, w*time.Second)
		}
	}
	if s.Last() != 10*time.Second {
		t.Errorf("Last = %v, want 10s", s.Last())
	}
	s.Reset()
	if got := s.Next(); got != time.Second {
		t.Errorf("after Reset: %v, want 1s", got)
	}
}

func TestJitterStaysWithinItsShare(t *testing.T) {
	s := Policy{Initial: time.Second, Max: time.Second, Jitter: 0.1}.Start()
	spread := false
	for range 200 {
		d := s.Next()
		if d < time.Second || d > 1100*time.Millisecond {
			t.Fatalf("delay %v outside [1s, 1.1s]", d)
		}
		spread = spread || d != time.Second
	}
	if !spread {
		t.Error("200 delays with jitter 0.1 were all exactly 1s")
	}
}

func TestFromStartsAtTheIntervalAndNeverCapsBelowIt(t *testing.T) {
	s := TagPoll.From(30 * time.Second).Start()
	if d := s.Next(); d < 30*time.Second || d > 33*time.Second {
		t.Errorf("first delay %v, want 30s (+10%%)", d)
	}
	long := TagPoll.From(time.Hour).Start()
	for range 3 {
		if d := long.Next(); d < time.Hour || d > 66*time.Minute {
			t.Fatalf("delay %v for a 1h interval, want 1h (+10%%): the cap must not cut below the interval", d)
		}
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if (Policy{Initial: time.Hour, Max: time.Hour}).Start().Wait(ctx) {
		t.Error("Wait returned true for a cancelled context")
	}
	if !(Policy{Initial: time.Millisecond, Max: time.Millisecond}).Start().Wait(context.Background()) {
		t.Error("Wait of 1ms returned false")
	}
}
