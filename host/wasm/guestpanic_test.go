package wasm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// A Go guest's panic is the reconcile's error in the guest's words, with its goroutine stack
// beside it, not a wasm trap; its lines are not logged as output as well.
func TestGuestPanicIsItsMessage(t *testing.T) {
	log, logs := logSink(t)
	m := compile(t, engine(t), module(t, "testguests", "panic-go"), wasm.Options{Name: "panicky", Logger: log})
	for _, tc := range []struct{ name, msg, frame string }{
		{"panic", "the plugin cannot reconcile panic", "main.explode"},
		{"index", "runtime error: index out of range [5] with length 1", "main.reconcile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			traps := m.Stats().Traps
			_, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: tc.name}, Logger: log})
			var p *wasm.GuestPanic
			if !errors.As(err, &p) {
				t.Fatalf("err = %v, want a GuestPanic", err)
			}
			if want := `plugin "panicky" panicked: ` + tc.msg; err.Error() != want {
				t.Errorf("err = %q, want %q", err, want)
			}
			if !errors.Is(err, wasm.ErrTrapped) || m.Stats().Traps != traps+1 {
				t.Errorf("a panic must count as a trap: Is(ErrTrapped) = %v, traps %d -> %d", errors.Is(err, wasm.ErrTrapped), traps, m.Stats().Traps)
			}
			var s reconcile.Stacker
			if !errors.As(err, &s) || !strings.HasPrefix(s.Stack(), "goroutine ") || !strings.Contains(s.Stack(), tc.frame) {
				t.Errorf("stack = %q, want the guest's goroutine stack with %s", p.GuestStack, tc.frame)
			}
			if strings.Contains(err.Error(), "wasm") || strings.Contains(p.GuestStack, "wasm stack trace") {
				t.Errorf("the wasm trap shows: %q\n%s", err, p.GuestStack)
			}
		})
	}
	if l := logs(); strings.Contains(l, "panic: ") || strings.Contains(l, "goroutine ") {
		t.Errorf("the panic's lines were logged as output too:\n%s", l)
	}
	// The next reconcile runs on a fresh instance.
	if _, err := m.Reconcile(context.Background(), call("fine")); err != nil {
		t.Fatalf("after the panics: %v", err)
	}
}

// A Go guest that runs out of memory says so, with the cap, as its runtime's fatal error; the
// error is not a bare "unreachable", and its goroutine stacks are not logged line by line.
func TestGuestOutOfMemoryIsSaid(t *testing.T) {
	log, logs := logSink(t)
	m := compile(t, engine(t), module(t, "testguests", "panic-go"), wasm.Options{Name: "hungry", MemoryLimit: 64 << 20, Logger: log})
	_, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "oom"}, Logger: log})
	var p *wasm.GuestPanic
	if !errors.As(err, &p) || !errors.Is(err, wasm.ErrTrapped) {
		t.Fatalf("err = %v, want a GuestPanic that is a trap", err)
	}
	if want := `plugin "hungry" failed: fatal error: out of memory (the cap is 64 MiB an instance)`; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	if l := logs(); strings.Contains(l, "fatal error") || strings.Contains(l, "goroutine ") {
		t.Errorf("the fatal error's lines were logged as output too:\n%s", l)
	}
	// Out of memory in its initialisation, the load says so.
	_, err = engine(t).Compile(context.Background(), module(t, "testguests", "panic-go"), wasm.Options{Name: "hungry", MemoryLimit: 3 << 20})
	if want := "the plugin failed: fatal error: runtime: cannot allocate memory (the cap is 3 MiB an instance)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a Go guest out of memory in _initialize: %v, want it to say %q", err, want)
	}
}

// A guest that writes a line starting "panic: " and returns has its lines logged, in order.
func TestGuestPanicLineWithoutPanic(t *testing.T) {
	log, logs := logSink(t)
	m := compile(t, engine(t), module(t, "testguests", "panic-go"), wasm.Options{Name: "panicky", Logger: log})
	if _, err := m.Reconcile(context.Background(), &wasm.Call{Request: abi.Request{Namespace: "ns", Name: "says-panic"}, Logger: log}); err != nil {
		t.Fatal(err)
	}
	l := logs()
	i, j := strings.Index(l, "panic: only a line that looks like one"), strings.Index(l, "and another")
	if i < 0 || j < i {
		t.Fatalf("the lines are not in the log, in order:\n%s", l)
	}
}

// A Go guest that loops is stopped at its deadline: a timeout, not a trap.
func TestGoGuestLoopTimesOut(t *testing.T) {
	m := compile(t, engine(t), module(t, "testguests", "panic-go"), wasm.Options{Name: "panicky"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := m.Reconcile(ctx, call("loop"))
	if !errors.Is(err, wasm.ErrTimedOut) || errors.Is(err, wasm.ErrTrapped) {
		t.Fatalf("err = %v, want ErrTimedOut alone", err)
	}
}
