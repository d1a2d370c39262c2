package wasm_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// Two plugins given one share of one slot never execute guests at once: while one loops, the
// other's reconcile waits for the slot within its deadline and fails saying why; a plugin of
// another share runs meanwhile; once the loop is interrupted at its deadline, the slot is free.
func TestCPUShareBoundsGuestsAtOnce(t *testing.T) {
	e := engine(t)
	share := wasm.NewCPUShare("the Plugins of team-a", 1)
	loop := compile(t, e, module(t, "testguests", "misbehave"), wasm.Options{Name: "team-a.loop", CPU: share})
	other := compile(t, e, module(t, "testguests", "misbehave"), wasm.Options{Name: "team-a.other", CPU: share})
	neighbour := compile(t, e, module(t, "testguests", "misbehave"), wasm.Options{Name: "team-b.neighbour", CPU: wasm.NewCPUShare("the Plugins of team-b", 1)})

	looped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := loop.Reconcile(ctx, call("loop"))
		looped <- err
	}()
	time.Sleep(200 * time.Millisecond) // the loop holds the slot
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := other.Reconcile(ctx, call("fine"))
	cancel()
	if !errors.Is(err, wasm.ErrThrottled) || !strings.Contains(err.Error(), "the Plugins of team-a run 1 guests at most at once") {
		t.Fatalf("a reconcile of the same share while the loop runs: %v, want ErrThrottled naming the share", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	if _, err := neighbour.Reconcile(ctx, call("fine")); err != nil {
		t.Fatalf("a neighbour's reconcile while team-a loops: %v", err)
	}
	cancel()
	if err := <-looped; !errors.Is(err, wasm.ErrTimedOut) {
		t.Fatalf("the loop: %v, want it interrupted at its deadline", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := other.Reconcile(ctx, call("fine")); err != nil {
		t.Fatalf("once the loop was interrupted: %v", err)
	}
}

// A call whose MayRun says no once it has its CPU slot and an instance does not run its guest:
// a reconcile that waited for the slot while its replica lost the plugin does nothing. One
// that may run, runs.
func TestACallThatMayNoLongerRunDoesNotRunTheGuest(t *testing.T) {
	e := engine(t)
	m := compile(t, e, module(t, "testguests", "misbehave"), wasm.Options{Name: "team-a.nap", CPU: wasm.NewCPUShare("the Plugins of team-a", 1)})
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	logged := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, s) })
	}

	looped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := m.Reconcile(ctx, call("loop"))
		looped <- err
	}()
	time.Sleep(200 * time.Millisecond) // the loop holds the slot
	var may atomic.Bool
	may.Store(true)
	time.AfterFunc(300*time.Millisecond, func() { may.Store(false) }) // lost while it waits
	var asked atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "nap-waited"}, Logger: logger,
		MayRun: func() bool { asked.Add(1); return may.Load() }}
	if _, err := m.Reconcile(ctx, c); !errors.Is(err, wasm.ErrNotRun) {
		t.Fatalf("a call that may no longer run once it has the slot: %v, want ErrNotRun", err)
	}
	if err := <-looped; !errors.Is(err, wasm.ErrTimedOut) {
		t.Fatalf("the loop: %v", err)
	}
	if asked.Load() != 1 || logged("napped nap-waited") {
		t.Fatalf("MayRun asked %d times (want 1); the guest ran: %v", asked.Load(), logged("napped nap-waited"))
	}

	c = &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "nap-ok"}, Logger: logger, MayRun: func() bool { return true }}
	if _, err := m.Reconcile(ctx, c); err != nil || !logged("napped nap-ok") {
		t.Fatalf("a call that may run: %v, logged %v", err, lines)
	}
}
