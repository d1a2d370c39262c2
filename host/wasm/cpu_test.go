package wasm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
