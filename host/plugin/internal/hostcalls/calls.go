package hostcalls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin/internal/policy"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/tracing"
)

// API is what one plugin's host calls share: who the plugin is, what it reads from and writes
// through, and its limits. Build it with New; it serves every reconcile of the plugin, whatever
// module version runs.
type API struct {
	Name      string                              // the plugin's name: its field manager
	For       schema.GroupVersionKind             // the kind it reconciles
	Mapper    meta.RESTMapper                     // the host's, shared by every plugin
	KnownKind func(schema.GroupKind, string) bool // answers without discovery; nil: unknown
	Objects   *object.Client                      // its writes, as the identity it acts as
	Recorder  record.EventRecorder                // its events, as that identity
	Reader    *Reader                             // its reads, from the host's informers
	Reads     *Limit
	Writes    *Limit
	Log       logr.Logger
	// Count, if set, counts each call by function and status.
	Count func(fn string, status abi.Status)
	// Owned, if set, reports whether this replica may still act for the plugin: a write
	// while it reports false is refused with StatusUnavailable (see ownership.Claim.Fresh).
	Owned func() bool
	// MayRead, if set, asks whether the identity the plugin acts as may do verb (get or list)
	// on resource in each of namespaces (none: cluster-wide), before a read is served from the
	// host's informers, which RBAC never sees. Its error says who may not do what.
	MayRead func(ctx context.Context, verb string, resource schema.GroupResource, namespaces []string) error

	lookups      *rate.Limiter  // lookups of kinds the host does not know
	apiForbidden rate.Sometimes // says calls the API server refuses, now and then
}

// Init readies the API's own limits; call it once, before the first call.
func (a *API) Init() *API {
	a.lookups = rate.NewLimiter(lookupQPS, lookupBurst)
	a.apiForbidden = rate.Sometimes{Interval: time.Minute}
	return a
}

// Calls serves one reconcile's host calls. It implements wasm.Host.
type Calls struct {
	API    *API
	Policy *policy.Policy // the policy of the module version the reconcile runs on
	Req    reconcile.Request
	// Index is the module version's field index values, which lists with fields use; nil
	// leaves every item to the guest's own test.
	Index *Index
	// DryRun sends every write with dryRun=All, so that the API server checks it and stores
	// nothing, and records no event: a version in its shadow run. Its calls are not counted.
	DryRun bool
	// ReadOnly refuses every write with bad request: the calls of a map function, which runs
	// on the informer's event path and may only read.
	ReadOnly bool
	// Record, if set, is told of every write call (create, update, patch, delete, event), with
	// the request and how it ended.
	Record func(call string, body []byte, status abi.Status)
}

// callError is a host call's failure: a status and a message for the guest.
type callError struct {
	status abi.Status
	msg    string
}

func (e *callError) Error() string { return e.msg }

func fail(s abi.Status, format string, args ...any) error {
	return &callError{status: s, msg: fmt.Sprintf(format, args...)}
}

// Call dispatches a host call. Every write passes the permission check, then the write rate
// limit and the ownership check (mayWrite), then goes to the API server.
func (c *Calls) Call(ctx context.Context, fn string, body []byte) (abi.Status, []byte) {
	var (
		resp []byte
		err  error
		span trace.Span
	)
	if tracing.Recording(ctx) { // a span per call, its API request's span under it
		ctx, span = tracing.Begin(ctx, "host "+fn)
		span.SetAttributes(tracing.Call.String(fn))
		defer span.End()
	}
	switch {
	case c.ReadOnly && fn != abi.ImportGet && fn != abi.ImportList:
		err = fail(abi.StatusBadRequest, "%s: a map function may only read (get, list): write from the reconcile it enqueues", fn)
	case fn == abi.ImportGet:
		resp, err = c.get(ctx, body)
	case fn == abi.ImportList:
		resp, err = c.list(ctx, body)
	case fn == abi.ImportCreate, fn == abi.ImportUpdate, fn == abi.ImportUpdateStatus:
		resp, err = c.write(ctx, fn, body)
	case fn == abi.ImportPatch:
		resp, err = c.patch(ctx, body)
	case fn == abi.ImportDelete:
		err = c.delete(ctx, body)
	case fn == abi.ImportEvent:
		err = c.event(ctx, body)
	default:
		err = fail(abi.StatusBadRequest, "unknown host function %q", fn)
	}
	status := abi.StatusOK
	if err != nil {
		status = statusOf(ctx, err)
		if status == abi.StatusForbidden || status == abi.StatusInternal {
			c.API.Log.V(1).Info("host call refused", "call", fn, "request", c.Req.String(), "status", status.String(), "error", err.Error())
		}
		// The host's own refusals are the plugin's business; the API server's are the
		// operator's (its RBAC, under impersonation): said at the default level, now and then.
		if ce := (*callError)(nil); status == abi.StatusForbidden && !errors.As(err, &ce) {
			c.API.apiForbidden.Do(func() {
				c.API.Log.Info("the API server refused a call of the plugin: check the RBAC of the identity it acts as (at most one such line a minute)", "call", fn, "request", c.Req.String(), "error", err.Error())
			})
		}
		resp = []byte(err.Error())
	}
	if span != nil {
		span.SetAttributes(tracing.Status.String(status.String()))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	if c.API.Count != nil && !c.DryRun {
		c.API.Count(fn, status)
	}
	if c.Record != nil && fn != abi.ImportGet && fn != abi.ImportList {
		c.Record(fn, body, status)
	}
	return status, resp
}

// statusOf maps an error to the status the guest sees.
func statusOf(ctx context.Context, err error) abi.Status {
	var ce *callError
	var netErr *net.OpError
	switch {
	case errors.As(err, &ce):
		return ce.status
	case errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil, apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return abi.StatusTimeout
	case apierrors.IsNotFound(err):
		return abi.StatusNotFound
	case apierrors.IsAlreadyExists(err):
		return abi.StatusAlreadyExists
	case apierrors.IsConflict(err):
		return abi.StatusConflict
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return abi.StatusForbidden
	case apierrors.IsInvalid(err):
		return abi.StatusInvalid
	case apierrors.IsRequestEntityTooLargeError(err):
		return abi.StatusTooLarge
	case apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err), apierrors.IsUnsupportedMediaType(err), meta.IsNoMatchError(err):
		return abi.StatusBadRequest
	case apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), errors.As(err, &netErr):
		return abi.StatusUnavailable
	}
	return abi.StatusInternal
}

// target resolves a kind to its resource and checks, under the plugin's one policy, that the
// plugin may do verb on it (on its subresource if sub is set) in namespace. A call whose group
// and verb the plugin's manifest and grant hold for no resource, or in a namespace outside the
// plugin's, is refused before the kind is looked up; nothing reaches the API server for a
// refused call.
func (c *Calls) target(apiVersion, kind, sub, verb, namespace string) (*meta.RESTMapping, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" {
		return nil, fail(abi.StatusBadRequest, "apiVersion %q and kind %q do not name a kind", apiVersion, kind)
	}
	gvk := gv.WithKind(kind)
	pol := c.Policy
	if err := pol.CheckCall(verb, gv.Group, policy.Kind(gvk), namespace); err != nil {
		return nil, fail(abi.StatusForbidden, "forbidden: %v", err)
	}
	// A kind the host does not know costs a discovery round: a plugin gets a few per second.
	if known := c.API.KnownKind; known != nil && !known(gvk.GroupKind(), gv.Version) && !c.API.lookups.Allow() {
		return nil, fail(abi.StatusUnavailable, "plugin %q looks up kinds the host does not know faster than %g/s (burst %d); %s is not looked up now: retry later",
			c.API.Name, float64(lookupQPS), lookupBurst, policy.Kind(gvk))
	}
	m, err := c.API.Mapper.RESTMapping(gvk.GroupKind(), gv.Version)
	switch {
	case meta.IsNoMatchError(err):
		return nil, fail(abi.StatusBadRequest, "no resource serves %s: is its CRD installed? (check apiVersion and kind: Kind is singular, as in manifests)", policy.Kind(gvk))
	case err != nil:
		return nil, fail(abi.StatusUnavailable, "looking up %s: %v", policy.Kind(gvk), err)
	}
	gr := m.Resource.GroupResource()
	if err := pol.Require(verb+" "+policy.Kind(gvk), abi.CallRules(verb, gr.Group, gr.Resource, sub)); err != nil {
		return nil, fail(abi.StatusForbidden, "forbidden: %v", err)
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if err := pol.CheckScope(gvk, namespaced); err != nil {
		return nil, fail(abi.StatusForbidden, "forbidden: %s %v", verb, err)
	}
	switch {
	case !namespaced && namespace != "":
		return nil, fail(abi.StatusBadRequest, "%s is cluster-scoped: leave namespace empty (it is %q)", policy.Kind(gvk), namespace)
	case namespaced && namespace == "" && verb != "list":
		return nil, fail(abi.StatusBadRequest, "%s is namespaced: give the object's namespace", policy.Kind(gvk))
	}
	return m, nil
}

func (c *Calls) resource(m *meta.RESTMapping, namespace string) *object.Resource {
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		namespace = ""
	}
	return c.API.Objects.Resource(m.Resource, namespace)
}

// A plugin's lookups of kinds the host does not know (each may cost a discovery round).
const (
	lookupQPS   = rate.Limit(1)
	lookupBurst = 5
)

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fail(abi.StatusBadRequest, "the request is not valid JSON for this call: %v", err)
	}
	return nil
}
