package hostcalls

import (
	"cmp"
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/object"
)

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

func (c *Calls) write(ctx context.Context, fn string, body []byte) ([]byte, error) {
	body, wo, err := abi.SplitWrite(body)
	if err != nil {
		return nil, fail(abi.StatusBadRequest, "%s: the request is not a Kubernetes object: %v", fn, err)
	}
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
	manager, err := abi.FieldManager(c.API.Name, wo.FieldOwner)
	if err != nil {
		return nil, fail(abi.StatusBadRequest, "%v", err)
	}
	if err := c.mayWrite(ctx); err != nil {
		return nil, err
	}
	// What is sent is obj.Raw: the object less metadata.managedFields, which the API server
	// keeps (abi.PatchSetsManagedFields says why).
	r := c.resource(m, obj.Namespace)
	var out []byte
	switch fn {
	case abi.ImportCreate:
		out, err = r.Create(ctx, obj.Raw, metav1.CreateOptions{FieldManager: manager, DryRun: c.dryRun(wo.DryRun)})
	case abi.ImportUpdate:
		out, err = r.Update(ctx, obj.Name, obj.Raw, metav1.UpdateOptions{FieldManager: manager, DryRun: c.dryRun(wo.DryRun)})
	default:
		out, err = r.Update(ctx, obj.Name, obj.Raw, metav1.UpdateOptions{FieldManager: manager, DryRun: c.dryRun(wo.DryRun)}, "status")
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// managedFieldsRefused is the answer to a patch that writes metadata.managedFields.
const managedFieldsRefused = "the patch writes metadata.managedFields, which the API server keeps and no plugin may write: leave them out"

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
	if abi.PatchSetsManagedFields(req.Type, req.Patch) {
		return nil, fail(abi.StatusBadRequest, "%s", managedFieldsRefused)
	}
	manager, err := abi.FieldManager(c.API.Name, req.FieldOwner)
	if err != nil {
		return nil, fail(abi.StatusBadRequest, "%v", err)
	}
	if err := c.mayWrite(ctx); err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: manager, DryRun: c.dryRun(req.DryRun)}
	if pt == types.ApplyPatchType {
		opts.Force = &req.Force
	}
	var subs []string
	if req.Subresource != "" {
		subs = []string{req.Subresource}
	}
	return c.resource(m, req.Namespace).Patch(ctx, req.Name, pt, req.Patch, opts, subs...)
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
	opts := metav1.DeleteOptions{DryRun: c.dryRun(req.DryRun)}
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

// dryRun is a write's dryRun option: All when the guest asks for it, and for every write of
// a shadow run.
func (c *Calls) dryRun(guest bool) []string {
	if c.DryRun || guest {
		return []string{metav1.DryRunAll}
	}
	return nil
}
