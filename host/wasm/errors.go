package wasm

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmrec/wasmrec/host/wasm/internal/binary"
)

// ErrClosed is returned by Reconcile on a module that has been closed (swapped out, say).
var ErrClosed = errors.New("module closed")

// ErrNotRun is returned by Reconcile and Map when the call's MayRun said no once the call had
// its CPU share and an instance: the guest did not run.
var ErrNotRun = errors.New("not run: the call may no longer run")

// ErrReservedExport refuses a module that exports a name the host adds to every module:
// wasmrec_interrupt, or one beginning with "wasmrec:".
var ErrReservedExport = binary.ErrReservedExport

// Errors a reconcile's error wraps when its guest did not return.
var (
	// ErrTrapped: the guest trapped (a panic, an unreachable, a memory fault).
	ErrTrapped = errors.New("reconcile trapped")
	// ErrTimedOut: the guest was interrupted at the reconcile's deadline.
	ErrTimedOut = errors.New("reconcile interrupted at its deadline")
)

// GuestPanic is a reconcile whose guest panicked: it wrote a "panic: ..." line to stderr, as a
// Go guest's runtime does, or a Go runtime's "fatal error: ..." (out of memory, a stack
// overflow), then trapped. Its error is the guest's own message; the lines it wrote after it
// (a Go guest's goroutine stack) are its Stack, and the wasm trap that ended it, which says
// only "unreachable", is left out. It wraps ErrTrapped.
type GuestPanic struct {
	Plugin     string
	Message    string // the panic line, less "panic: "; a fatal error's line whole
	GuestStack string // what the guest wrote after it, cut past 200 lines or 32 KiB
}

// failureLine says whether a line a guest wrote to stderr starts its runtime's account of how
// it fails: a Go panic, or a Go runtime's fatal error.
func failureLine(line []byte) bool {
	return bytes.HasPrefix(line, []byte("panic: ")) || bytes.HasPrefix(line, []byte("fatal error: "))
}

func newGuestPanic(plugin string, lines []string, opts Options) *GuestPanic {
	msg := strings.TrimPrefix(lines[0], "panic: ")
	if msg == "fatal error: out of memory" || msg == "fatal error: runtime: cannot allocate memory" {
		msg += fmt.Sprintf(" (the cap is %d MiB an instance)", opts.MemoryLimit>>20)
	}
	return &GuestPanic{
		Plugin:     plugin,
		Message:    msg,
		GuestStack: strings.Trim(strings.Join(lines[1:], "\n"), "\n"),
	}
}

func (e *GuestPanic) Error() string {
	if strings.HasPrefix(e.Message, "fatal error: ") {
		return fmt.Sprintf("plugin %q failed: %s", e.Plugin, e.Message)
	}
	return fmt.Sprintf("plugin %q panicked: %s", e.Plugin, e.Message)
}

// Stack is the guest's stack: the controller logs it beside the error (reconcile.Stacker).
func (e *GuestPanic) Stack() string { return e.GuestStack }

func (e *GuestPanic) Unwrap() error { return ErrTrapped }

// worded is sentinel (ErrTrapped, ErrTimedOut) in the words of c: a map's says map, and still
// is the sentinel to errors.Is.
func (c *Call) worded(sentinel error) error {
	if c.Map == nil {
		return sentinel
	}
	return mapWords{sentinel}
}

type mapWords struct{ sentinel error }

func (e mapWords) Error() string { return strings.Replace(e.sentinel.Error(), "reconcile", "map", 1) }
func (e mapWords) Unwrap() error { return e.sentinel }

// explain adds what a guest's exit code or a trap most likely means.
func explain(err error, opts Options) error {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fmt.Errorf("interrupted at its deadline: %w", err)
		case exitCodeOutOfMemory:
			return fmt.Errorf("exited with code 2, which a Go guest does when it runs out of memory (the cap is %d MiB): %w", opts.MemoryLimit>>20, err)
		}
		return fmt.Errorf("exited with code %d: %w", exit.ExitCode(), err)
	}
	return err
}

// PanicError is a panic in the host (wazero's code or wasmrec's) while it served one plugin,
// recovered so that the other plugins and the host carry on.
type PanicError struct {
	Value any    // what was panicked with
	Stack []byte // the goroutine's stack where it panicked
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic in the host: %v (a bug in wasmrec or wazero: please report it with the stack logged beside this error)", e.Value)
}

// recoverPanic turns a panic into *err, a *PanicError; use it deferred.
func recoverPanic(err *error) {
	if r := recover(); r != nil {
		*err = &PanicError{Value: r, Stack: debug.Stack()}
	}
}
