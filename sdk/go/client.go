package wasmrec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

// StatusError is a host call that did not succeed.
type StatusError struct {
	Call    string
	Status  abi.Status
	Message string
}

func (e *StatusError) Error() string {
	if strings.HasPrefix(e.Message, e.Status.String()+":") { // the host's message names it already
		return e.Call + ": " + e.Message
	}
	return fmt.Sprintf("%s: %s: %s", e.Call, e.Status, e.Message)
}

func statusOf(err error) abi.Status {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return abi.StatusOK
}

// IsNotFound reports a missing object.
func IsNotFound(err error) bool { return statusOf(err) == abi.StatusNotFound }

// IgnoreNotFound returns nil on a missing object's error, and err otherwise, as
// controller-runtime's client.IgnoreNotFound: a reconcile of an object deleted meanwhile ends
// there, and is not retried or logged as an error.
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// IsAlreadyExists reports a create of an object that exists.
func IsAlreadyExists(err error) bool { return statusOf(err) == abi.StatusAlreadyExists }

// IsConflict reports a stale resourceVersion: read again and retry.
func IsConflict(err error) bool { return statusOf(err) == abi.StatusConflict }

// IsForbidden reports a call outside the plugin's permissions.
func IsForbidden(err error) bool { return statusOf(err) == abi.StatusForbidden }

// IsInvalid reports an object the API server refused as invalid.
func IsInvalid(err error) bool { return statusOf(err) == abi.StatusInvalid }

// IsBadRequest reports a call the host or the API server could not take as asked: a malformed
// request, or a write from a map function.
func IsBadRequest(err error) bool { return statusOf(err) == abi.StatusBadRequest }

// Client reads objects from the host's cache and writes them through the API server.
type Client struct {
	t Transport // nil: the wasmrec host
}

// NewClient returns a Client that calls the wasmrec host: what a plugin uses.
func NewClient() *Client { return &Client{} }

// Transport is the other side of the SDK: what a Client's calls and the Logger's lines go to.
// In a plugin it is the wasmrec host, and nothing needs to name it. It exists so that tests can
// put a stand-in there: package fake (github.com/wasmrec/wasmrec/sdk/go/fake) is one.
type Transport interface {
	// Call makes a host call: fn is an abi.Import* call name (abi.ImportGet...), req its JSON
	// request (ABI.md). It returns the status and the response: the call's answer on
	// abi.StatusOK, a message saying what went wrong otherwise. The response is the caller's:
	// decoded objects share its bytes, so Call must not modify or reuse them afterwards.
	Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte)
	// Log takes one log line as the log import does (level abi.LogDebug to abi.LogError): the
	// message, then, if there are key/values, a NUL byte and a JSON array of them.
	Log(level int32, line []byte)
}

// NewClientWith returns a Client whose calls go to t instead of the wasmrec host: for tests
// (fake.Cluster.Client returns one). Plugins use NewClient.
func NewClientWith(t Transport) *Client { return &Client{t: t} }

// ObjectRef names an object.
type ObjectRef = abi.ObjectRef

// Raw makes a host call whose request is encoded already (ABI.md): fn is an abi.Import* name.
// It returns the answer, which is the caller's alone, or a *StatusError. It is what package client's typed calls are made
// of; a plugin uses the methods above or package client.
func (c *Client) Raw(ctx context.Context, fn string, req []byte) ([]byte, error) {
	return c.send(ctx, fn, req)
}

func (c *Client) call(ctx context.Context, fn string, req any) ([]byte, error) {
	var body []byte
	switch r := req.(type) { // the requests of reads, and objects, written without reflection
	case abi.GetRequest:
		body = getRequest(r)
	case abi.ListRequest:
		body = listRequest(r)
	case json.RawMessage:
		body = r
	default:
		var err error
		if body, err = jsonv.Marshal(req); err != nil {
			return nil, fmt.Errorf("%s: encoding the request: %w", fn, err)
		}
	}
	return c.send(ctx, fn, body)
}

// send makes host call fn with the encoded request body.
func (c *Client) send(ctx context.Context, fn string, body []byte) ([]byte, error) {
	var (
		status abi.Status
		resp   []byte
	)
	if c.t != nil {
		status, resp = c.t.Call(ctx, fn, body)
	} else {
		status, resp = hostCall(fn, body)
	}
	if status != abi.StatusOK {
		return nil, &StatusError{Call: fn, Status: status, Message: string(resp)}
	}
	return resp, nil
}

func (c *Client) object(ctx context.Context, fn string, req any) (*Object, error) {
	resp, err := c.call(ctx, fn, req)
	if err != nil {
		return nil, err
	}
	m, err := jsonv.DecodeObject(resp)
	if err != nil {
		return nil, fmt.Errorf("%s: decoding the response: %w", fn, err)
	}
	return &Object{Object: m}, nil
}

// getRequest is r's JSON, as json.Marshal writes it.
func getRequest(r abi.GetRequest) []byte {
	b := make([]byte, 0, 64+len(r.APIVersion)+len(r.Kind)+len(r.Namespace)+len(r.Name)+len(r.Encoding))
	b = append(b, `{"apiVersion":`...)
	b = jsonv.AppendString(b, r.APIVersion)
	b = append(b, `,"kind":`...)
	b = jsonv.AppendString(b, r.Kind)
	if r.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b = jsonv.AppendString(b, r.Namespace)
	}
	b = append(b, `,"name":`...)
	b = jsonv.AppendString(b, r.Name)
	if r.Encoding != "" {
		b = append(b, `,"encoding":`...)
		b = jsonv.AppendString(b, r.Encoding)
	}
	return append(b, '}')
}

// listRequest is r's JSON, as json.Marshal writes it.
func listRequest(r abi.ListRequest) []byte {
	b := make([]byte, 0, 80+len(r.APIVersion)+len(r.Kind)+len(r.Namespace)+len(r.LabelSelector)+len(r.Encoding))
	b = append(b, `{"apiVersion":`...)
	b = jsonv.AppendString(b, r.APIVersion)
	b = append(b, `,"kind":`...)
	b = jsonv.AppendString(b, r.Kind)
	if r.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b = jsonv.AppendString(b, r.Namespace)
	}
	if r.LabelSelector != "" {
		b = append(b, `,"labelSelector":`...)
		b = jsonv.AppendString(b, r.LabelSelector)
	}
	if r.Encoding != "" {
		b = append(b, `,"encoding":`...)
		b = jsonv.AppendString(b, r.Encoding)
	}
	return append(b, '}')
}

// Get reads an object from the host's cache.
func (c *Client) Get(ctx context.Context, apiVersion, kind, namespace, name string) (*Object, error) {
	return c.object(ctx, abi.ImportGet, abi.GetRequest{ObjectRef: abi.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}})
}

// GetInto reads an object from the host's cache and decodes it straight into v (a typed
// k8s.io/api struct, say): one decode, where Get then Object.Into takes three. A k8s.io/api type
// of the kind (a type named for it, with the generated protobuf methods Unmarshal and
// MarshalToSizedBuffer) is asked for in the Kubernetes protobuf encoding, which decodes several
// times faster than JSON in a guest; the host answers JSON for a kind it has no types of, and
// then so is v decoded. Such a v is zeroed first, whichever the answer: it holds the object
// read, and nothing of what it held before.
func (c *Client) GetInto(ctx context.Context, apiVersion, kind, namespace, name string, v any) error {
	req := abi.GetRequest{ObjectRef: abi.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}}
	if asksProtobuf(v, kind) {
		req.Encoding = abi.EncodingProtobuf
	}
	resp, err := c.call(ctx, abi.ImportGet, req)
	if err != nil {
		return err
	}
	if err := decodeTyped(resp, v, apiVersion, kind, false); err != nil {
		return fmt.Errorf("get %s %s: decoding the response: %w", kind, path(namespace, name), err)
	}
	return nil
}

// ListInto reads objects of a kind from the host's cache, as List does, and decodes them
// straight into list: a typed List (a k8s.io/api ConfigMapList, say), or any struct whose
// "items" field takes the objects. A k8s.io/api List of the kind (named kind+"List") is asked
// for in protobuf, as GetInto does.
func (c *Client) ListInto(ctx context.Context, apiVersion, kind, namespace, labelSelector string, list any) error {
	req := abi.ListRequest{APIVersion: apiVersion, Kind: kind, Namespace: namespace, LabelSelector: labelSelector}
	if asksProtobuf(list, kind+"List") {
		req.Encoding = abi.EncodingProtobuf
	}
	resp, err := c.call(ctx, abi.ImportList, req)
	if err != nil {
		return err
	}
	if err := decodeTyped(resp, list, apiVersion, kind, true); err != nil {
		return fmt.Errorf("list %s: decoding the response: %w", kind, err)
	}
	return nil
}

// path is namespace/name, or name for a cluster-scoped object.
func path(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// List reads objects of a kind from the host's cache; namespace "" lists all namespaces, and
// labelSelector is in kubectl's form ("app=web,tier in (a,b)").
func (c *Client) List(ctx context.Context, apiVersion, kind, namespace, labelSelector string) ([]*Object, error) {
	resp, err := c.call(ctx, abi.ImportList, abi.ListRequest{APIVersion: apiVersion, Kind: kind, Namespace: namespace, LabelSelector: labelSelector})
	if err != nil {
		return nil, err
	}
	if out, ok := listItems(resp); ok {
		return out, nil
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(resp, &list); err != nil {
		return nil, fmt.Errorf("list: decoding the response: %w", err)
	}
	out := make([]*Object, len(list.Items))
	for i, it := range list.Items {
		out[i] = &Object{Object: it}
	}
	return out, nil
}

// listItems reads a list's answer, {"items": [objects]}, without reflection; ok is false for
// anything else (invalid JSON, items that are not objects, a key encoding/json would also take
// for items, such as "Items"), which List leaves to encoding/json, for its reading and its error.
func listItems(resp []byte) (out []*Object, ok bool) {
	top, err := jsonv.DecodeObject(resp)
	if err != nil {
		return nil, false
	}
	var items []any
	for k, v := range top {
		if !strings.EqualFold(k, "items") {
			continue
		}
		if k != "items" {
			return nil, false
		}
		if items, ok = v.([]any); !ok {
			return nil, false
		}
	}
	out = make([]*Object, len(items))
	for i, it := range items {
		m, isMap := it.(map[string]any)
		if !isMap && it != nil {
			return nil, false
		}
		out[i] = &Object{Object: m}
	}
	return out, true
}

// WriteOption is an option of a write (ABI.md, "Write options"): FieldOwner or DryRun.
type WriteOption func(*abi.WriteOptions)

// FieldOwner names the writer within the plugin: the write's field manager is the plugin's
// name, "/" and owner (the plugin's name alone without it). It stands for controller-runtime's
// client.FieldOwner; the plugin's name is kept so that no plugin writes as another manager.
func FieldOwner(owner string) WriteOption {
	return func(o *abi.WriteOptions) { o.FieldOwner = owner }
}

// DryRun has the API server check a write and answer it as it would store it, storing nothing
// (controller-runtime's client.DryRunAll).
func DryRun(o *abi.WriteOptions) { o.DryRun = true }

func writeOptions(opts []WriteOption) abi.WriteOptions {
	var o abi.WriteOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// write sends obj through a create, update or update_status call.
func (c *Client) write(ctx context.Context, fn string, obj *Object, opts []WriteOption) (*Object, error) {
	o := writeOptions(opts)
	if o == (abi.WriteOptions{}) {
		return c.object(ctx, fn, obj.Object)
	}
	body, err := jsonv.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", fn, err)
	}
	return c.object(ctx, fn, json.RawMessage(o.Wrap(body)))
}

// Create creates obj and returns it as the API server stored it.
func (c *Client) Create(ctx context.Context, obj *Object, opts ...WriteOption) (*Object, error) {
	return c.write(ctx, abi.ImportCreate, obj, opts)
}

// Update replaces obj (its resourceVersion must be current).
func (c *Client) Update(ctx context.Context, obj *Object, opts ...WriteOption) (*Object, error) {
	return c.write(ctx, abi.ImportUpdate, obj, opts)
}

// Patch patches an object; patchType is abi.PatchMerge, PatchJSON, PatchStrategic or PatchApply,
// and patch is a JSON document (a []byte, json.RawMessage, or anything json.Marshal takes).
func (c *Client) Patch(ctx context.Context, ref ObjectRef, patchType string, patch any, opts ...WriteOption) (*Object, error) {
	return c.patch(ctx, ref, patchType, patch, "", false, opts)
}

// Apply server-side applies obj (apiVersion, kind, metadata.name and namespace set): the fields
// it holds become the plugin's. force takes fields other managers own.
func (c *Client) Apply(ctx context.Context, obj *Object, force bool, opts ...WriteOption) (*Object, error) {
	return c.patch(ctx, obj.Ref(), abi.PatchApply, obj.Object, "", force, opts)
}

func (c *Client) patch(ctx context.Context, ref ObjectRef, patchType string, patch any, sub string, force bool, opts []WriteOption) (*Object, error) {
	raw, ok := patch.([]byte)
	if !ok {
		var err error
		if raw, err = jsonv.Marshal(patch); err != nil {
			return nil, fmt.Errorf("patch: encoding the patch: %w", err)
		}
	}
	return c.object(ctx, abi.ImportPatch, abi.PatchRequest{ObjectRef: ref, Type: patchType, Patch: raw, Subresource: sub, Force: force, WriteOptions: writeOptions(opts)})
}

// DeleteOptions tune Delete.
type DeleteOptions struct {
	// PropagationPolicy is "", "Orphan", "Background" or "Foreground".
	PropagationPolicy string
	// UID, if set, deletes only the object with this UID.
	UID string
	// DryRun has the API server check the delete and answer it without deleting.
	DryRun bool
}

// Delete deletes an object.
func (c *Client) Delete(ctx context.Context, ref ObjectRef, opts DeleteOptions) error {
	_, err := c.call(ctx, abi.ImportDelete, abi.DeleteRequest{ObjectRef: ref, PropagationPolicy: opts.PropagationPolicy, UID: opts.UID, DryRun: opts.DryRun})
	return err
}

// Event records a Kubernetes Event ("Normal" or "Warning") about the object being reconciled.
func (c *Client) Event(ctx context.Context, eventType, reason, message string) error {
	_, err := c.call(ctx, abi.ImportEvent, abi.EventRequest{Type: eventType, Reason: reason, Message: message})
	return err
}

// EventFor records a Kubernetes Event about another object.
func (c *Client) EventFor(ctx context.Context, ref ObjectRef, eventType, reason, message string) error {
	_, err := c.call(ctx, abi.ImportEvent, abi.EventRequest{Object: &ref, Type: eventType, Reason: reason, Message: message})
	return err
}

// Status writes the status subresource.
func (c *Client) Status() *StatusClient { return &StatusClient{c} }

// StatusClient writes the status subresource.
type StatusClient struct{ c *Client }

// Update replaces obj's status (its resourceVersion must be current).
func (s *StatusClient) Update(ctx context.Context, obj *Object, opts ...WriteOption) (*Object, error) {
	return s.c.write(ctx, abi.ImportUpdateStatus, obj, opts)
}

// Patch patches the status subresource.
func (s *StatusClient) Patch(ctx context.Context, ref ObjectRef, patchType string, patch any, opts ...WriteOption) (*Object, error) {
	return s.c.patch(ctx, ref, patchType, patch, "status", false, opts)
}

// Apply server-side applies obj's status.
func (s *StatusClient) Apply(ctx context.Context, obj *Object, force bool, opts ...WriteOption) (*Object, error) {
	return s.c.patch(ctx, obj.Ref(), abi.PatchApply, obj.Object, "status", force, opts)
}
