package reconcile

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Request names the object to reconcile. It carries no object: a reconciler reads the current
// state from the cache, so two events for one key collapse into one Request in the queue.
type Request struct {
	types.NamespacedName
}

// Result tells the controller whether and when to come back to a Request.
//
// The controller applies it as follows (an error beside a Result wins and the Result is ignored):
//
//	error           -> AddRateLimited (the per-key backoff grows)
//	terminal error  -> logged and counted, Forget, no retry
//	RequeueAfter>0  -> Forget, AddAfter(RequeueAfter)
//	Requeue         -> AddRateLimited
//	zero Result     -> Forget
type Result struct {
	// Requeue asks for the Request to be queued again through the rate limiter.
	Requeue bool

	// RequeueAfter asks for the Request to be queued again after this long. It wins over Requeue.
	RequeueAfter time.Duration
}

// IsZero reports whether r asks for nothing.
func (r Result) IsZero() bool { return r == Result{} }

// Reconciler makes the object named by a Request match its desired state.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// Func adapts a function to a Reconciler.
type Func func(context.Context, Request) (Result, error)

// Reconcile calls f.
func (f Func) Reconcile(ctx context.Context, req Request) (Result, error) { return f(ctx, req) }

var _ Reconciler = Func(nil)

// TerminalError wraps err so the controller logs and counts it but does not retry the Request:
// retrying cannot help (the object is invalid, say) until the object itself changes.
// TerminalError(nil) returns nil.
func TerminalError(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or an error it wraps, was made by TerminalError.
func IsTerminal(err error) bool {
	var te *terminalError
	return errors.As(err, &te)
}

type terminalError struct{ err error }

func (e *terminalError) Error() string { return "terminal error: " + e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

type stoppingKey struct{}

// WithStopping returns ctx carrying stop, a channel closed when the host begins to stop. The
// controller runs each reconcile on a context that is not cancelled at shutdown (an in-flight
// reconcile finishes, within the graceful-shutdown timeout); Stopping tells it the host waits.
func WithStopping(ctx context.Context, stop <-chan struct{}) context.Context {
	return context.WithValue(ctx, stoppingKey{}, stop)
}

// Stopping returns the channel WithStopping put in ctx: closed once the host is stopping. It
// is nil (never ready) for a context without one. A reconciler waiting on a timer of its own
// should end its wait there: a plugin's sleep does.
func Stopping(ctx context.Context) <-chan struct{} {
	stop, _ := ctx.Value(stoppingKey{}).(<-chan struct{})
	return stop
}

// Stacker is an error that carries the stack where it happened, a plugin's own panic say: the
// controller logs the stack beside the error, under "stack".
type Stacker interface {
	error
	Stack() string
}

// Valuer is an error that carries key/values for the line that logs it: a plugin's reconcile
// ID and module digest, which name the reconcile in the plugin's own lines too.
type Valuer interface {
	error
	LogValues() []any
}

// LogValuesOf is the key/values the controller logs beside err: a Valuer's in its chain, then
// its stack (StackOf).
func LogValuesOf(err error) []any {
	var kv []any
	if v, ok := errors.AsType[Valuer](err); ok {
		kv = append(kv, v.LogValues()...)
	}
	return append(kv, StackOf(err)...)
}

// StackOf is the "stack" key and value of an error that carries its own stack (a Stacker),
// for a log line's key/values; none for another error.
func StackOf(err error) []any {
	var s Stacker
	if errors.As(err, &s) && s.Stack() != "" {
		return []any{"stack", s.Stack()}
	}
	return nil
}
