package hostcalls

import (
	"context"
	"errors"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin/internal/policy"
)

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
	c.Index.learn(req.Indexed)
	// Stable order: the guest's work (and its writes) should not depend on map iteration.
	items := make([]*object.Object, 0, len(objs))
	size := len(`{"items":[]}`)
	var filter *fieldFilter
	if len(req.Fields) > 0 {
		filter = newFieldFilter(req.Fields)
	}
	for _, o := range objs {
		obj := o.(*object.Object)
		if obj.Namespace != "" && !c.Policy.InNamespace(obj.Namespace) {
			continue // a list across namespaces covers the plugin's own
		}
		if filter != nil && c.Index.excludes(obj, filter) {
			continue
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
