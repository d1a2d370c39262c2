package wasm_test

import (
	"context"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/host/wasm"
)

// A pool with nothing to do shrinks to zero after its idle timeout, and the next key is
// reconciled on a new instance.
func TestIdlePoolShrinksToZero(t *testing.T) {
	const idle = 100 * time.Millisecond
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", MaxInstances: 3, IdleTimeout: idle})
	// Three reconciles at once: three instances.
	errs := make(chan error, 3)
	for _, name := range []string{"nap-a", "nap-b", "nap-c"} {
		go func() {
			_, err := m.Reconcile(context.Background(), call(name))
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := m.Instances(); n != 3 {
		t.Fatalf("%d idle instances after three reconciles at once, want 3", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, mem := m.Instances()
		if n == 0 && mem == 0 && m.Stats().Live.Load() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d instances (%d bytes, %d live) 5s after the pool went idle, want none", n, mem, m.Stats().Live.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := m.Stats().IdleClosed.Load(); got != 3 {
		t.Fatalf("closed %d idle instances, want 3", got)
	}
	made := m.Stats().Instantiated.Load()
	if _, err := m.Reconcile(context.Background(), call("fine")); err != nil {
		t.Fatalf("the next key after the pool shrank: %v", err)
	}
	if got := m.Stats().Instantiated.Load(); got != made+1 {
		t.Fatalf("instantiated %d for the next key, want 1", got-made)
	}
}

// An instance used again before its idle timeout stays; only the ones left idle go.
func TestIdleTimeoutCountsFromLastUse(t *testing.T) {
	const idle = 300 * time.Millisecond
	m := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", IdleTimeout: idle})
	stop := time.Now().Add(3 * idle)
	for time.Now().Before(stop) { // one instance, never idle as long as the timeout
		if _, err := m.Reconcile(context.Background(), call("fine")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(idle / 5)
	}
	if got := m.Stats().IdleClosed.Load(); got != 0 {
		t.Fatalf("closed %d instances in use every %s, want none", got, idle/5)
	}
	// Negative: kept for ever.
	never := compile(t, engine(t), module(t, "testguests", "misbehave"), wasm.Options{Name: "misbehave", IdleTimeout: -1})
	time.Sleep(2 * idle)
	if n, _ := never.Instances(); n != 1 {
		t.Fatalf("%d idle instances with no idle timeout, want the one", n)
	}
}
