package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/codec"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

// Object is a Kubernetes object of a generated kind: a pointer to a corev1.ConfigMap, an
// appsv1.Deployment, or a CRD type with the same generated methods.
type Object interface {
	metav1.Object
	runtime.Object
	codec.Marshaler
	codec.Unmarshaler
	// Reset makes the object its zero value, as a read into it starts.
	Reset()
	GetAPIVersion() string
	GetKind() string
	SetAPIVersionKind(apiVersion, kind string)
}

// ObjectList is a list of a kind: a pointer to a corev1.ConfigMapList...
type ObjectList interface {
	runtime.Object
	codec.Unmarshaler
	Reset()
	// FilterItems keeps the items for which keep is true, in order.
	FilterItems(keep func(runtime.Object) bool)
}

// ObjectKey names an object: its namespace ("" for a cluster-scoped kind) and name.
type ObjectKey = types.NamespacedName

// ObjectKeyFromObject is obj's key.
func ObjectKeyFromObject(obj metav1.Object) ObjectKey {
	return ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// Client reads typed objects from the host's cache and writes them through the API server.
type Client struct {
	c   *wasmrec.Client
	idx indexes
}

// New returns a Client that calls the wasmrec host: what a plugin uses.
func New() *Client { return &Client{c: wasmrec.NewClient()} }

// From returns a Client that makes its calls through c: in tests, From(cluster.Client()) of a
// fake.Cluster.
func From(c *wasmrec.Client) *Client { return &Client{c: c} }

// IgnoreNotFound is nil for a missing object's error, and err otherwise.
func IgnoreNotFound(err error) error { return wasmrec.IgnoreNotFound(err) }

// IgnoreAlreadyExists is nil for a create of an object that exists, and err otherwise.
func IgnoreAlreadyExists(err error) error {
	if wasmrec.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// apiVersionKind is obj's apiVersion and kind: those set on it, else its type's.
func apiVersionKind(obj Object) (string, string) {
	apiVersion, kind := obj.APIVersionKind()
	if v := obj.GetAPIVersion(); v != "" {
		apiVersion = v
	}
	if k := obj.GetKind(); k != "" {
		kind = k
	}
	return apiVersion, kind
}

func ref(obj Object) abi.ObjectRef {
	apiVersion, kind := apiVersionKind(obj)
	return abi.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// decodeInto makes obj what resp, the answer of call fn on r, holds, with its apiVersion and
// kind set. resp is a host call's answer, which nothing else holds: obj's strings share it.
func decodeInto(fn string, r abi.ObjectRef, resp []byte, obj Object) error {
	apiVersion, kind := obj.APIVersionKind()
	obj.Reset()
	if err := codec.UnmarshalKeep(resp, obj); err != nil {
		return fmt.Errorf("%s %s: decoding the answer into a %s: %w", fn, describe(r), kind, err)
	}
	if obj.GetKind() == "" {
		obj.SetAPIVersionKind(apiVersion, kind)
	}
	return nil
}

// encode is obj's JSON with its apiVersion and kind set from its type where it has none.
func encode(obj Object) ([]byte, error) {
	if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
		obj.SetAPIVersionKind(apiVersionKind(obj))
	}
	return codec.Marshal(obj)
}

func describe(r abi.ObjectRef) string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// beginRef starts a request naming r: {"apiVersion":..., "kind":..., "namespace":..., "name":...,
// the object left open for the call's own members.
func beginRef(e *codec.Encoder, r abi.ObjectRef) {
	e.BeginObject()
	e.Key(`"apiVersion":`)
	e.String(r.APIVersion)
	e.Key(`"kind":`)
	e.String(r.Kind)
	if r.Namespace != "" {
		e.Key(`"namespace":`)
		e.String(r.Namespace)
	}
	e.Key(`"name":`)
	e.String(r.Name)
}

// listRequest is the request of a list of kind that o selects (its namespace and labels).
func listRequest(apiVersion, kind string, o ListOptions, told []abi.IndexValues) []byte {
	var e codec.Encoder
	e.BeginObject()
	e.Key(`"apiVersion":`)
	e.String(apiVersion)
	e.Key(`"kind":`)
	e.String(kind)
	if o.Namespace != "" {
		e.Key(`"namespace":`)
		e.String(o.Namespace)
	}
	if o.LabelSelector != "" {
		e.Key(`"labelSelector":`)
		e.String(o.LabelSelector)
	}
	if len(o.Fields) > 0 {
		e.Key(`"fields":`)
		e.BeginObject()
		for _, f := range slices.Sorted(maps.Keys(o.Fields)) { // the same options, the same request
			e.KeyString(f)
			e.String(o.Fields[f])
		}
		e.EndObject()
	}
	if len(told) > 0 {
		e.Key(`"indexed":`)
		e.BeginArray()
		for _, t := range told {
			e.BeginObject()
			e.Key(`"uid":`)
			e.String(t.UID)
			e.Key(`"resourceVersion":`)
			e.String(t.ResourceVersion)
			e.Key(`"field":`)
			e.String(t.Field)
			e.Key(`"values":`)
			e.BeginArray()
			for _, v := range t.Values {
				e.String(v)
			}
			e.EndArray()
			e.EndObject()
		}
		e.EndArray()
	}
	e.EndObject()
	req, _ := e.Bytes()
	return req
}

// Get reads the object key names into obj, from the host's cache. obj is reset first: it holds
// the object read and nothing of what it held before.
func (c *Client) Get(ctx context.Context, key ObjectKey, obj Object) error {
	apiVersion, kind := obj.APIVersionKind()
	var e codec.Encoder
	beginRef(&e, abi.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: key.Namespace, Name: key.Name})
	e.EndObject()
	req, _ := e.Bytes()
	resp, err := c.c.Raw(ctx, abi.ImportGet, req)
	if err != nil {
		return err
	}
	return decodeInto("get", abi.ObjectRef{Kind: kind, Namespace: key.Namespace, Name: key.Name}, resp, obj)
}

// List reads the objects of list's kind that opts select (InNamespace, MatchingLabels,
// HasLabels, MatchingFields), from the host's cache. list is reset first. MatchingFields are
// tested in the plugin with the indexes registered by IndexField, on the objects the other
// options select and the host does not know to fail them (it knows an index's values the
// plugin told it).
func (c *Client) List(ctx context.Context, list ObjectList, opts ...ListOption) error {
	apiVersion, listKind := list.APIVersionKind()
	kind, ok := strings.CutSuffix(listKind, "List")
	if !ok {
		return fmt.Errorf("list: %s is not a list kind (its name does not end in List)", listKind)
	}
	var o ListOptions
	o.ApplyOptions(opts)
	match, err := c.matcher(apiVersion, kind, o.Fields)
	if err != nil {
		return err
	}
	resp, err := c.c.Raw(ctx, abi.ImportList, listRequest(apiVersion, kind, o, c.idx.takeTold()))
	if err != nil {
		return err
	}
	list.Reset()
	if err := codec.UnmarshalKeep(resp, list); err != nil {
		return fmt.Errorf("list %s: decoding the answer: %w", kind, err)
	}
	if match != nil {
		list.FilterItems(match.match)
	}
	if tm, ok := list.(interface{ SetAPIVersionKind(string, string) }); ok {
		tm.SetAPIVersionKind(apiVersion, listKind)
	}
	return nil
}

// write sends obj through a create, update or update_status call, with the options of the
// write, and reads the answer into it.
func (c *Client) write(ctx context.Context, fn string, obj Object, fieldManager string, dry []string) error {
	body, err := encode(obj)
	if err != nil {
		return fmt.Errorf("%s %s: encoding it: %w", fn, describe(ref(obj)), err)
	}
	wo, err := writeOptions(fieldManager, dry)
	if err != nil {
		return fmt.Errorf("%s %s: %w", fn, describe(ref(obj)), err)
	}
	resp, err := c.c.Raw(ctx, fn, wo.Wrap(body))
	if err != nil {
		return err
	}
	return decodeInto(fn, ref(obj), resp, obj)
}

func writeOptions(fieldManager string, dry []string) (abi.WriteOptions, error) {
	d, err := dryRun(dry)
	return abi.WriteOptions{FieldOwner: fieldManager, DryRun: d}, err
}

// Create creates obj, and fills it with what the API server stored (its uid, resourceVersion,
// defaults). Its apiVersion and kind are set from its type if it has none. opts are FieldOwner
// and DryRunAll.
func (c *Client) Create(ctx context.Context, obj Object, opts ...CreateOption) error {
	var o CreateOptions
	for _, opt := range opts {
		opt.ApplyToCreate(&o)
	}
	return c.write(ctx, abi.ImportCreate, obj, o.FieldManager, o.DryRun)
}

// Update replaces obj (its resourceVersion must be current, else the error is a conflict:
// wasmrec.IsConflict) and fills it with what the API server stored. opts are FieldOwner and
// DryRunAll.
func (c *Client) Update(ctx context.Context, obj Object, opts ...UpdateOption) error {
	var o UpdateOptions
	for _, opt := range opts {
		opt.ApplyToUpdate(&o)
	}
	return c.write(ctx, abi.ImportUpdate, obj, o.FieldManager, o.DryRun)
}

// Patch patches obj with patch (MergeFrom(original), StrategicMergeFrom(original), RawPatch,
// Apply), and fills obj with what the API server stored. opts are ForceOwnership (for Apply),
// FieldOwner and DryRunAll.
func (c *Client) Patch(ctx context.Context, obj Object, patch Patch, opts ...PatchOption) error {
	var o PatchOptions
	for _, opt := range opts {
		opt.ApplyToPatch(&o)
	}
	return c.patch(ctx, obj, patch, "", o)
}

func (c *Client) patch(ctx context.Context, obj Object, patch Patch, sub string, o PatchOptions) error {
	r := ref(obj)
	wo, err := writeOptions(o.FieldManager, o.DryRun)
	if err != nil {
		return fmt.Errorf("patch %s: %w", describe(r), err)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("patch %s: %w", describe(r), err)
	}
	var e codec.Encoder
	beginRef(&e, r)
	e.Key(`"type":`)
	e.String(patch.Type())
	e.Key(`"patch":`)
	e.Raw(data)
	if sub != "" {
		e.Key(`"subresource":`)
		e.String(sub)
	}
	if o.Force {
		e.Key(`"force":`)
		e.Bool(true)
	}
	if wo.FieldOwner != "" {
		e.Key(`"fieldOwner":`)
		e.String(wo.FieldOwner)
	}
	if wo.DryRun {
		e.Key(`"dryRun":`)
		e.Bool(true)
	}
	e.EndObject()
	req, err := e.Bytes()
	if err != nil {
		return fmt.Errorf("patch %s: the patch is not JSON: %w", describe(r), err)
	}
	resp, err := c.c.Raw(ctx, abi.ImportPatch, req)
	if err != nil {
		return err
	}
	return decodeInto("patch", r, resp, obj)
}

// Delete deletes obj; opts are PropagationPolicy, Preconditions (of its UID) and DryRunAll.
func (c *Client) Delete(ctx context.Context, obj Object, opts ...DeleteOption) error {
	var o DeleteOptions
	for _, opt := range opts {
		opt.ApplyToDelete(&o)
	}
	return c.delete(ctx, ref(obj), o)
}

func (c *Client) delete(ctx context.Context, r abi.ObjectRef, o DeleteOptions) error {
	dry, err := dryRun(o.DryRun)
	if err != nil {
		return fmt.Errorf("delete %s: %w", describe(r), err)
	}
	var e codec.Encoder
	beginRef(&e, r)
	if o.PropagationPolicy != nil {
		e.Key(`"propagationPolicy":`)
		e.String(string(*o.PropagationPolicy))
	}
	if o.Preconditions != nil && o.Preconditions.UID != nil {
		e.Key(`"uid":`)
		e.String(string(*o.Preconditions.UID))
	}
	if dry {
		e.Key(`"dryRun":`)
		e.Bool(true)
	}
	e.EndObject()
	req, _ := e.Bytes()
	_, err = c.c.Raw(ctx, abi.ImportDelete, req)
	return err
}

// DeleteAllOf deletes the objects of obj's kind that opts select (InNamespace,
// MatchingLabels, HasLabels, and the DeleteOptions): those a List finds in the host's cache,
// one delete each, as the host deletes one object at a time. An object gone meanwhile is not
// an error; the first other error ends it.
func (c *Client) DeleteAllOf(ctx context.Context, obj Object, opts ...DeleteAllOfOption) error {
	var lo ListOptions
	var do DeleteOptions
	for _, opt := range opts {
		opt.ApplyToDeleteAllOf(&lo, &do)
	}
	if len(lo.Fields) > 0 {
		return fmt.Errorf("deleteAllOf with MatchingFields: not supported; List with them, then Delete each")
	}
	apiVersion, kind := apiVersionKind(obj)
	resp, err := c.c.Raw(ctx, abi.ImportList, listRequest(apiVersion, kind, lo, nil))
	if err != nil {
		return err
	}
	var items itemRefs
	if err := codec.UnmarshalKeep(resp, &items); err != nil {
		return fmt.Errorf("deleteAllOf %s: decoding the list: %w", kind, err)
	}
	for _, it := range items.refs {
		r := abi.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: it.Namespace, Name: it.Name}
		if err := c.delete(ctx, r, do); err != nil && !wasmrec.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// Event records a Kubernetes Event about obj: eventType "Normal" or "Warning", a reason in
// UpperCamelCase, and a message (the host bounds both, ABI.md). It stands for controller-runtime's
// record.EventRecorder.Event, with a context and an error: the host refuses an event the plugin
// may not create.
func (c *Client) Event(ctx context.Context, obj Object, eventType, reason, message string) error {
	return c.c.EventFor(ctx, ref(obj), eventType, reason, message)
}

// Status is the status subresource's writer: Update and Patch of obj's status.
func (c *Client) Status() *StatusWriter { return &StatusWriter{c: c} }

// SubResource is the writer of a subresource; only "status" can be written.
func (c *Client) SubResource(name string) *StatusWriter { return &StatusWriter{c: c, sub: name} }

// StatusWriter writes an object's status subresource.
type StatusWriter struct {
	c   *Client
	sub string
}

// Update replaces obj's status (the rest of obj is ignored by the API server). opts are
// FieldOwner and DryRunAll.
func (s *StatusWriter) Update(ctx context.Context, obj Object, opts ...SubResourceUpdateOption) error {
	if s.sub != "" && s.sub != "status" {
		return fmt.Errorf("update of subresource %q: only status can be written", s.sub)
	}
	var o SubResourceUpdateOptions
	for _, opt := range opts {
		opt.ApplyToSubResourceUpdate(&o)
	}
	return s.c.write(ctx, abi.ImportUpdateStatus, obj, o.FieldManager, o.DryRun)
}

// Patch patches obj's status. opts are ForceOwnership (for Apply), FieldOwner and DryRunAll.
func (s *StatusWriter) Patch(ctx context.Context, obj Object, patch Patch, opts ...SubResourcePatchOption) error {
	if s.sub != "" && s.sub != "status" {
		return fmt.Errorf("patch of subresource %q: only status can be written", s.sub)
	}
	var o SubResourcePatchOptions
	for _, opt := range opts {
		opt.ApplyToSubResourcePatch(&o)
	}
	return s.c.patch(ctx, obj, patch, "status", o.PatchOptions)
}

// itemRefs reads the namespace and name of each item of a list answer, and skips the rest.
type itemRefs struct{ refs []types.NamespacedName }

func (x *itemRefs) DecodeJSON(d *codec.Decoder) {
	if !d.Object() {
		return
	}
	for i := 0; ; i++ {
		k, ok := d.Member(i)
		if !ok {
			return
		}
		if k != "items" || !d.Array() {
			d.Skip()
			continue
		}
		for j := 0; d.Elem(j); j++ {
			var it item
			it.DecodeJSON(d)
			x.refs = append(x.refs, types.NamespacedName{Namespace: it.meta.Namespace, Name: it.meta.Name})
		}
	}
}

// item reads an object's metadata and skips the rest.
type item struct{ meta metav1.ObjectMeta }

func (x *item) DecodeJSON(d *codec.Decoder) {
	if !d.Object() {
		return
	}
	for i := 0; ; i++ {
		k, ok := d.Member(i)
		if !ok {
			return
		}
		if k == "metadata" {
			x.meta.DecodeJSON(d)
		} else {
			d.Skip()
		}
	}
}
