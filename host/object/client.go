package object

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Client reads and writes Objects with the API server's REST API, in JSON. It is the dynamic
// client's counterpart for a host that hands objects on rather than reading them.
type Client struct {
	rest rest.Interface
}

// NewClient returns a Client for the API server cfg points at.
func NewClient(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = negotiatedSerializer{}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("object: REST client for %s: %w", cfg.Host, err)
	}
	return &Client{rest: rc}, nil
}

// Resource returns the calls on one resource, in namespace ("" for a cluster-scoped resource,
// or for every namespace when listing).
func (c *Client) Resource(r schema.GroupVersionResource, namespace string) *Resource {
	return &Resource{client: c, resource: r, namespace: namespace}
}

// Resource makes calls on one resource.
type Resource struct {
	client    *Client
	resource  schema.GroupVersionResource
	namespace string
}

func (r *Resource) path(name string, subresources ...string) []string {
	var p []string
	if r.resource.Group == "" {
		p = append(p, "api")
	} else {
		p = append(p, "apis", r.resource.Group)
	}
	p = append(p, r.resource.Version)
	if r.namespace != "" {
		p = append(p, "namespaces", r.namespace)
	}
	p = append(p, r.resource.Resource)
	if name != "" {
		p = append(p, name)
	}
	return append(p, subresources...)
}

// List lists the resource.
func (r *Resource) List(ctx context.Context, opts metav1.ListOptions) (*List, error) {
	body, err := raw(r.client.rest.Get().AbsPath(r.path("")...).
		SpecificallyVersionedParams(&opts, parameterCodec, v1).
		Do(ctx))
	if err != nil {
		return nil, err
	}
	l := &List{}
	if err := json.Unmarshal(body, l); err != nil {
		return nil, fmt.Errorf("object: decoding the %s list: %w", r.resource, err)
	}
	return l, nil
}

// Watch watches the resource. The events carry *Object, or *metav1.Status for errors.
func (r *Resource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.client.rest.Get().AbsPath(r.path("")...).
		SpecificallyVersionedParams(&opts, parameterCodec, v1).
		Watch(ctx)
}

// Create creates the object whose JSON is body. It returns what the API server answered, as
// Answer gives it; so do Update and Patch.
func (r *Resource) Create(ctx context.Context, body []byte, opts metav1.CreateOptions) ([]byte, error) {
	return r.do(ctx, r.client.rest.Post().AbsPath(r.path("")...).Body(body).
		SpecificallyVersionedParams(&opts, parameterCodec, v1))
}

// Update replaces the object (or its subresource) named name with body.
func (r *Resource) Update(ctx context.Context, name string, body []byte, opts metav1.UpdateOptions, subresources ...string) ([]byte, error) {
	return r.do(ctx, r.client.rest.Put().AbsPath(r.path(name, subresources...)...).Body(body).
		SpecificallyVersionedParams(&opts, parameterCodec, v1))
}

// Patch patches the object (or its subresource) named name.
func (r *Resource) Patch(ctx context.Context, name string, pt types.PatchType, patch []byte, opts metav1.PatchOptions, subresources ...string) ([]byte, error) {
	return r.do(ctx, r.client.rest.Patch(pt).AbsPath(r.path(name, subresources...)...).Body(patch).
		SpecificallyVersionedParams(&opts, parameterCodec, v1))
}

// Delete deletes the object named name.
func (r *Resource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.client.rest.Delete().AbsPath(r.path(name)...).Body(&opts).Do(ctx).Error()
}

func (r *Resource) do(ctx context.Context, req *rest.Request) ([]byte, error) {
	body, err := raw(req.Do(ctx))
	if err != nil {
		return nil, err
	}
	out, err := Answer(body)
	if err != nil {
		return nil, fmt.Errorf("object: reading the %s the API server returned: %w", r.resource, err)
	}
	return out, nil
}

// raw returns a response's body, or its error with the API server's Status (reason, message,
// causes): Result.Raw alone gives only a generic error for the HTTP code.
func raw(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// scheme knows only the meta kinds a REST call answers with besides objects: Status, WatchEvent,
// and the options it is sent.
var (
	scheme         = runtime.NewScheme()
	parameterCodec = runtime.NewParameterCodec(scheme)
	// v1 is the version the meta kinds are sent in, as the dynamic client sends them.
	v1 = schema.GroupVersion{Version: "v1"}
)

func init() {
	metav1.AddToGroupVersion(scheme, v1)
}

// creater makes the meta kinds of scheme, and an Object for any other kind.
type creater struct{}

func (creater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	if o, err := scheme.New(kind); err == nil {
		return o, nil
	}
	return &Object{}, nil
}

// typer types the meta kinds of scheme, and an Object by its own apiVersion and kind.
type typer struct{}

func (typer) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	switch o := obj.(type) {
	case *Object:
		return []schema.GroupVersionKind{o.GroupVersionKind()}, false, nil
	case *List:
		return []schema.GroupVersionKind{o.GroupVersionKind()}, false, nil
	}
	return scheme.ObjectKinds(obj)
}

func (typer) Recognizes(schema.GroupVersionKind) bool { return true }

// negotiatedSerializer speaks JSON only: errors and watch events through the meta scheme,
// objects as Objects.
type negotiatedSerializer struct{}

var jsonSerializer = serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, creater{}, typer{}, serializerjson.SerializerOptions{})

func (negotiatedSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType:        runtime.ContentTypeJSON,
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       jsonSerializer,
		StreamSerializer: &runtime.StreamSerializerInfo{
			EncodesAsText: true,
			Serializer:    jsonSerializer,
			Framer:        serializerjson.Framer,
		},
	}}
}

func (negotiatedSerializer) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return runtime.WithVersionEncoder{Version: gv, Encoder: e, ObjectTyper: scheme}
}

func (negotiatedSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}
