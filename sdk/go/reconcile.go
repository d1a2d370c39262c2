package wasmrec

import (
	"context"
	"errors"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

// Request names the object to reconcile, as controller-runtime's reconcile.Request does:
// req.Namespace and req.Name, and req.NamespacedName, the key a typed Get takes
// (client.ObjectKey). Its String is "namespace/name", or "name" for a cluster-scoped object.
type Request struct {
	types.NamespacedName
	// Retries is how many times in a row this request was retried with backoff (failures and
	// Requeue results since the last success, RequeueAfter or terminal error).
	Retries int
}

// NewRequest is the request for the object namespace/name.
func NewRequest(namespace, name string) Request {
	return Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

// Result says whether and when to come back. An error returned beside it wins.
type Result struct {
	// Requeue asks to be called again through the rate limiter (with backoff).
	Requeue bool
	// RequeueAfter asks to be called again after this long; it wins over Requeue.
	RequeueAfter time.Duration
}

// Reconciler makes the world match the object named by the request.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// ReconcilerFunc adapts a function to a Reconciler.
type ReconcilerFunc func(context.Context, Request) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, req Request) (Result, error) {
	return f(ctx, req)
}

// The manifest and its parts are the types of package abi (go doc
// github.com/wasmrec/wasmrec/abi Manifest), named here so that a plugin imports the SDK alone.
type (
	// Manifest is what the plugin says about itself, returned to the host as JSON: its Name,
	// For (the kind it reconciles), Owns (kinds whose controller owner, of the For kind, is
	// reconciled: controller-runtime's Owns), Watches (other kinds, mapped to For objects by
	// their Map: same name, every object of the namespace, or a MapWatch's function) and Permissions (what it asks to
	// be granted; kubebuilder RBAC markers add to them at wasmrec build).
	Manifest = abi.Manifest
	// Watch names a kind by APIVersion and Kind, with Predicates that filter its events and,
	// in Watches, a Map (MapSameName, MapNamespace, or a function: make it with MapWatch).
	Watch = abi.Watch
	// Predicate filters a Watch's events: a Type (Predicate* constants) and its arguments.
	Predicate = abi.Predicate
	// Permission is an RBAC rule without resource names: a Group, Resources (with
	// subresources as "deployments/status") and Verbs.
	Permission = abi.Permission
	// LabelSelector is a Kubernetes label selector (matchLabels, matchExpressions), for a
	// PredicateLabelSelector.
	LabelSelector = abi.LabelSelector
)

var registered struct {
	r     Reconciler
	m     Manifest
	added []Permission                                                // AddPermissions
	maps  map[string]func(context.Context, []byte) ([]Request, error) // MapWatch, by "apiVersion/kind"
}

// TerminalError wraps err so the host does not retry (until the object changes).
func TerminalError(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err}
}

type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// IsTerminal reports whether err was made by TerminalError.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}

// encodeResult turns a reconcile's outcome into the ABI's result envelope; nil means the zero
// result.
func encodeResult(buf []byte, res Result, err error) []byte {
	if err == nil && !res.Requeue && res.RequeueAfter <= 0 {
		return nil
	}
	r := abi.Result{Requeue: res.Requeue, RequeueAfter: max(res.RequeueAfter, 0)}
	if err != nil {
		r = abi.Result{Failed: true, Terminal: IsTerminal(err), Err: err.Error()}
		if len(r.Err) > abi.MaxMessage {
			r.Err = r.Err[:abi.MaxMessage]
		}
	}
	return abi.AppendResult(buf[:0], r)
}
