package wasm_test

import (
	"context"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// A guest's monotonic clock starts when its instance does: on a host up for ten hours a fresh
// instance reads less than a second, its clock then moves with the host's, nanosecond for
// nanosecond, and a new instance starts from zero again. The wall clock is the real one.
func TestGuestMonotonicClockStartsWithTheInstance(t *testing.T) {
	e := engine(t)
	var hostClock atomic.Int64 // the host's monotonic clock, which moves only when told
	hostClock.Store(int64(10 * time.Hour))
	wasm.SetNanotime(e, hostClock.Load)
	log, logs := logSink(t)
	clock := module(t, "testguests", "clock")
	line := regexp.MustCompile(`monotonic (\d+) realtime (\d+)`)
	read := func(m *wasm.Module) (time.Duration, time.Time) {
		t.Helper()
		if _, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "x"}, Logger: log}); err != nil {
			t.Fatal(err)
		}
		all := line.FindAllStringSubmatch(logs(), -1)
		if len(all) == 0 {
			t.Fatalf("the guest logged no clock readings:\n%s", logs())
		}
		last := all[len(all)-1]
		mono, _ := strconv.ParseInt(last[1], 10, 64)
		wall, _ := strconv.ParseInt(last[2], 10, 64)
		return time.Duration(mono), time.Unix(wall, 0)
	}

	first := compile(t, e, clock, wasm.Options{Name: "clock", Logger: log})
	mono, wall := read(first)
	if mono >= time.Second {
		t.Errorf("a fresh instance's monotonic clock reads %s on a host up for 10h: it tells the plugin the host's uptime", mono)
	}
	if d := time.Since(wall); d < -time.Minute || d > time.Minute {
		t.Errorf("the guest's wall clock reads %s, %s from the host's", wall, d)
	}

	hostClock.Add(int64(5*time.Second + 7))
	later, _ := read(first)
	if got, want := later-mono, 5*time.Second+7; got != want {
		t.Errorf("after 5s7ns on the host the guest's monotonic clock moved %s, want %s", got, want)
	}

	second := compile(t, e, clock, wasm.Options{Name: "clock-2", Logger: log}) // a new instance, 10h5s into the host's life
	if mono, _ := read(second); mono >= time.Second {
		t.Errorf("a new instance's monotonic clock reads %s, want it to start from zero", mono)
	}
}
