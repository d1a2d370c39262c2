package hostcalls

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
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
	// DryRun sends every write with dryRun=All, so that the API server checks it and stores
	// nothing, and records no event: a version in its shadow run. Its calls are not counted.
	DryRun bool
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
	switch fn {
	case abi.ImportGet:
		resp, err = c.get(ctx, body)
	case abi.ImportList:
		resp, err = c.list(ctx, body)
	case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus:
		resp, err = c.write(ctx, fn, body)
	case abi.ImportPatch:
		resp, err = c.patch(ctx, body)
	case abi.ImportDelete:
		err = c.delete(ctx, body)
	case abi.ImportEvent:
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

// Limit is one of a plugin's call rate limits (reads or writes). A call that has to wait for a
// token is counted, and said in the log at most every 30 s: a plugin held back by its own limit
// is otherwise only slow.
type Limit struct {
	name           string // "write" or "read"
	field          string // its field in the plugin's config
	lim            *rate.Limiter
	log            rate.Sometimes
	waits, seconds prometheus.Counter // nil without metrics
}

// NewLimit returns a limit of qps calls a second, with burst, for the calls configured in the
// plugin's config field (writes or reads). waits and seconds count the calls that waited and
// how long; nil for none.
func NewLimit(field string, qps float64, burst int, waits, seconds prometheus.Counter) *Limit {
	return &Limit{name: strings.TrimSuffix(field, "s"), field: field, lim: rate.NewLimiter(rate.Limit(qps), burst),
		log: rate.Sometimes{Interval: 30 * time.Second}, waits: waits, seconds: seconds}
}

// Wait takes a token, waiting at most until ctx's deadline.
func (l *Limit) Wait(ctx context.Context, log logr.Logger) error {
	r := l.lim.Reserve()
	d := r.Delay()
	if d == 0 {
		return nil
	}
	refuse := func() error {
		r.Cancel()
		return fail(abi.StatusTimeout, "the %s rate limit (%g/s, burst %d) would not let this call through before the reconcile's deadline", l.name, float64(l.lim.Limit()), l.lim.Burst())
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return refuse()
	}
	if l.waits != nil {
		l.waits.Inc()
		l.seconds.Add(d.Seconds())
	}
	l.log.Do(func() {
		log.Info(fmt.Sprintf("%s are waiting on the plugin's %s rate limit; raise %s.qps and %s.burst in its config if this load is expected", l.field, l.name, l.field, l.field),
			"qps", float64(l.lim.Limit()), "burst", l.lim.Burst(), "wait", d.Round(time.Millisecond))
	})
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return refuse()
	}
}

// mayWrite waits for the write rate limit, then checks that this replica still holds the
// plugin: the last check before a write goes out.
func (c *Calls) mayWrite(ctx context.Context) error {
	if err := c.API.Writes.Wait(ctx, c.API.Log); err != nil {
		return err
	}
	if c.API.Owned != nil && !c.API.Owned() {
		return fail(abi.StatusUnavailable, "write not made: this replica's Lease on the plugin went unrenewed past the renew deadline, and another replica may run it now")
	}
	return nil
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fail(abi.StatusBadRequest, "the request is not valid JSON for this call: %v", err)
	}
	return nil
}

// reviewRead asks, if the plugin acts as an identity of its own, whether that identity may read
// m's resource where the read reaches: namespace, or across the plugin's namespaces, or the
// cluster.
func (c *Calls) reviewRead(ctx context.Context, verb string, m *meta.RESTMapping, namespace string) error {
	if c.API.MayRead == nil {
		return nil
	}
	var namespaces []string
	switch {
	case m.Scope.Name() != meta.RESTScopeNameNamespace:
	case namespace != "":
		namespaces = []string{namespace}
	default:
		namespaces = c.Policy.Namespaces
	}
	if err := c.API.MayRead(ctx, verb, m.Resource.GroupResource(), namespaces); err != nil {
		return fail(abi.StatusForbidden, "forbidden: %v", err)
	}
	return nil
}

func (c *Calls) get(ctx context.Context, body []byte) ([]byte, error) {
	var ref abi.GetRequest
	if err := decode(body, &ref); err != nil {
		return nil, err
	}
	// Any encoding but protobuf is answered JSON, as a host that predates the field does.
	proto := ref.Encoding == abi.EncodingProtobuf
	m, err := c.target(ref.APIVersion, ref.Kind, "", "get", ref.Namespace)
	if err != nil {
		return nil, err
	}
	if ref.Name == "" {
		return nil, fail(abi.StatusBadRequest, "get needs a name (list reads many)")
	}
	if err := c.reviewRead(ctx, "get", m, ref.Namespace); err != nil {
		return nil, err
	}
	if err := c.API.Reads.Wait(ctx, c.API.Log); err != nil {
		return nil, err
	}
	obj, err := c.API.Reader.Get(ctx, m.GroupVersionKind, ref.Namespace, ref.Name)
	if err != nil {
		return nil, refusedRead("get", m.GroupVersionKind, err)
	}
	o := obj.(*object.Object)
	if proto {
		if b, ok := protobufObject(m.GroupVersionKind, o); ok {
			return b, nil
		}
	}
	// The guest gets the bytes the API server sent; Call's caller copies them into its memory.
	return o.Raw, nil
}

// refusedRead turns a read of an informer whose list the API server refuses the host into
// forbidden, naming the kind and what the host lacks: the plugin may read it, the host cannot.
// It is the operator's to fix, but not the plugin's identity's RBAC (its writes'), so it is not
// said as the API server refusing the plugin. Other errors pass unchanged.
func refusedRead(verb string, gvk schema.GroupVersionKind, err error) error {
	var refused *cache.RefusedError
	if !errors.As(err, &refused) {
		return err
	}
	return fail(abi.StatusForbidden, "%s %s: %v", verb, policy.Kind(gvk), refused)
}

func (c *Calls) list(ctx context.Context, body []byte) ([]byte, error) {
	var req abi.ListRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	// Any encoding but protobuf is answered JSON, as a host that predates the field does.
	proto := req.Encoding == abi.EncodingProtobuf
	m, err := c.target(req.APIVersion, req.Kind, "", "list", req.Namespace)
	if err != nil {
		return nil, err
	}
	if err := c.reviewRead(ctx, "list", m, req.Namespace); err != nil {
		return nil, err
	}
	if err := c.API.Reads.Wait(ctx, c.API.Log); err != nil {
		return nil, err
	}
	sel, err := labels.Parse(req.LabelSelector)
	if err != nil {
		return nil, fail(abi.StatusBadRequest, "labelSelector %q: %v", req.LabelSelector, err)
	}
	objs, err := c.API.Reader.List(ctx, m.GroupVersionKind, req.Namespace, sel)
	if err != nil {
		return nil, refusedRead("list", m.GroupVersionKind, err)
	}
	// Stable order: the guest's work (and its writes) should not depend on map iteration.
	items := make([]*object.Object, 0, len(objs))
	size := len(`{"items":[]}`)
	for _, o := range objs {
		obj := o.(*object.Object)
		if obj.Namespace != "" && !c.Policy.InNamespace(obj.Namespace) {
			continue // a list across namespaces covers the plugin's own
		}
		items = append(items, obj)
		size += len(obj.Raw) + 1
	}
	slices.SortFunc(items, func(a, b *object.Object) int {
		if n := strings.Compare(a.Namespace, b.Namespace); n != 0 {
			return n
		}
		return strings.Compare(a.Name, b.Name)
	})
	if proto {
		if b, ok := protobufList(m.GroupVersionKind, items); ok {
			return b, nil
		}
	}
	// abi.ListResponse, written out: json.Marshal would scan every item again.
	out := make([]byte, 0, size)
	out = append(out, `{"items":[`...)
	for i, o := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, o.Raw...)
	}
	return append(out, "]}"...), nil
}

func (c *Calls) write(ctx context.Context, fn string, body []byte) ([]byte, error) {
	obj, err := object.Decode(body)
	if err != nil {
		return nil, fail(abi.StatusBadRequest, "%s: the request is not a Kubernetes object: %v", fn, err)
	}
	verb, sub := fn, ""
	if fn == abi.ImportUpdateStatus {
		verb, sub = "update", "status"
	}
	m, err := c.target(obj.APIVersion, obj.Kind, sub, verb, obj.Namespace)
	if err != nil {
		return nil, err
	}
	if fn != abi.ImportCreate && obj.Name == "" {
		return nil, fail(abi.StatusBadRequest, "%s: the object has no metadata.name", fn)
	}
	if err := c.mayWrite(ctx); err != nil {
		return nil, err
	}
	r := c.resource(m, obj.Namespace)
	var out *object.Object
	switch fn {
	case abi.ImportCreate:
		out, err = r.Create(ctx, body, metav1.CreateOptions{FieldManager: c.API.Name, DryRun: c.dryRun()})
	case abi.ImportUpdate:
		out, err = r.Update(ctx, obj.Name, body, metav1.UpdateOptions{FieldManager: c.API.Name, DryRun: c.dryRun()})
	default:
		out, err = r.Update(ctx, obj.Name, body, metav1.UpdateOptions{FieldManager: c.API.Name, DryRun: c.dryRun()}, "status")
	}
	if err != nil {
		return nil, err
	}
	return out.Raw, nil
}

var patchTypes = map[string]types.PatchType{
	abi.PatchMerge:     types.MergePatchType,
	abi.PatchJSON:      types.JSONPatchType,
	abi.PatchStrategic: types.StrategicMergePatchType,
	abi.PatchApply:     types.ApplyPatchType,
}

func (c *Calls) patch(ctx context.Context, body []byte) ([]byte, error) {
	var req abi.PatchRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	pt, ok := patchTypes[req.Type]
	if !ok {
		return nil, fail(abi.StatusBadRequest, "patch type %q: use merge, json, strategic or apply", req.Type)
	}
	if req.Subresource != "" && req.Subresource != "status" {
		return nil, fail(abi.StatusBadRequest, "subresource %q: only status can be patched", req.Subresource)
	}
	m, err := c.target(req.APIVersion, req.Kind, req.Subresource, "patch", req.Namespace)
	if err != nil {
		return nil, err
	}
	if req.Name == "" {
		return nil, fail(abi.StatusBadRequest, "patch needs the object's name")
	}
	if err := c.mayWrite(ctx); err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: c.API.Name, DryRun: c.dryRun()}
	if pt == types.ApplyPatchType {
		opts.Force = &req.Force
	}
	var subs []string
	if req.Subresource != "" {
		subs = []string{req.Subresource}
	}
	out, err := c.resource(m, req.Namespace).Patch(ctx, req.Name, pt, req.Patch, opts, subs...)
	if err != nil {
		return nil, err
	}
	return out.Raw, nil
}

func (c *Calls) delete(ctx context.Context, body []byte) error {
	var req abi.DeleteRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	m, err := c.target(req.APIVersion, req.Kind, "", "delete", req.Namespace)
	if err != nil {
		return err
	}
	if req.Name == "" { // without it the request would delete the whole collection
		return fail(abi.StatusBadRequest, "delete needs the object's name: a plugin deletes one object at a time")
	}
	if err := c.mayWrite(ctx); err != nil {
		return err
	}
	opts := metav1.DeleteOptions{DryRun: c.dryRun()}
	if req.PropagationPolicy != "" {
		pp := metav1.DeletionPropagation(req.PropagationPolicy)
		opts.PropagationPolicy = &pp
	}
	if req.UID != "" {
		uid := types.UID(req.UID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return c.resource(m, req.Namespace).Delete(ctx, req.Name, opts)
}

// The bounds of an event's reason and message (ABI.md): the API server's own for events.k8s.io
// (a reason of 128, a note of 1 KiB). A plugin's events are the host's to send and, refused,
// to log: unbounded, one plugin's messages filled the host's log and memory.
const (
	MaxEventReason  = 128
	MaxEventMessage = 1024
)

func (c *Calls) event(ctx context.Context, body []byte) error {
	var req abi.EventRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	if req.Type != corev1.EventTypeNormal && req.Type != corev1.EventTypeWarning {
		return fail(abi.StatusBadRequest, "event type %q: use Normal or Warning", req.Type)
	}
	if req.Reason == "" {
		return fail(abi.StatusBadRequest, "an event needs a reason")
	}
	if len(req.Reason) > MaxEventReason {
		return fail(abi.StatusBadRequest, "an event's reason is %d bytes, over the limit of %d: use a short CamelCase word, and say the rest in the message", len(req.Reason), MaxEventReason)
	}
	if len(req.Message) > MaxEventMessage {
		return fail(abi.StatusBadRequest, "an event's message is %d bytes, over the limit of %d: say less, or log the rest", len(req.Message), MaxEventMessage)
	}
	if err := c.Policy.Require("an event", []abi.Rule{{Resource: "events", Verb: "create"}}); err != nil {
		return fail(abi.StatusForbidden, "forbidden: %v", err)
	}
	ref := abi.ObjectRef{APIVersion: c.API.For.GroupVersion().String(), Kind: c.API.For.Kind, Namespace: c.Req.Namespace, Name: c.Req.Name}
	if req.Object != nil {
		ref = *req.Object
	}
	if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || ref.Kind == "" || ref.Name == "" {
		return fail(abi.StatusBadRequest, "an event's object needs apiVersion, kind and name (it has %q, %q, %q)", ref.APIVersion, ref.Kind, ref.Name)
	}
	// The event is created in the object's namespace; one about a cluster-scoped object in default.
	if ns := cmp.Or(ref.Namespace, metav1.NamespaceDefault); !c.Policy.InNamespace(ns) {
		return fail(abi.StatusForbidden, "forbidden: the event would be recorded in namespace %q, outside plugin %q's namespaces %v", ns, c.API.Name, c.Policy.Namespaces)
	}
	regarding := &unstructured.Unstructured{}
	regarding.SetAPIVersion(ref.APIVersion)
	regarding.SetKind(ref.Kind)
	regarding.SetNamespace(ref.Namespace)
	regarding.SetName(ref.Name)
	// The UID links the event to the object; look it up for the For kind, which is cached anyway.
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.WithKind(ref.Kind) == c.API.For {
		if o, err := c.API.Reader.Get(ctx, c.API.For, ref.Namespace, ref.Name); err == nil {
			regarding.SetUID(o.(*object.Object).UID)
		}
	}
	// The recorder sends events in the background, and the API server's refusal of one would
	// be logged, whole, by it: an event the plugin's ServiceAccount may not create is refused
	// here, to the guest, instead.
	if c.API.MayRead != nil {
		if err := c.API.MayRead(ctx, "create", schema.GroupResource{Resource: "events"}, []string{cmp.Or(ref.Namespace, metav1.NamespaceDefault)}); err != nil {
			return fail(abi.StatusForbidden, "forbidden: %v", err)
		}
	}
	if err := c.mayWrite(ctx); err != nil {
		return err
	}
	if !c.DryRun {
		c.API.Recorder.Event(regarding, req.Type, req.Reason, req.Message)
	}
	return nil
}

// dryRun is the writes' dryRun option: All for a shadow run.
func (c *Calls) dryRun() []string {
	if c.DryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}
