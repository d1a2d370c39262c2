package wasmrec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wasmrec/wasmrec/sdk/go/codec"

	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

// Object is a Kubernetes object as a JSON map, like unstructured.Unstructured without the
// dependency.
type Object struct {
	Object map[string]any
}

// NewObject returns an object of a kind with a namespace ("" for cluster-scoped) and name.
func NewObject(apiVersion, kind, namespace, name string) *Object {
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	return &Object{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}}
}

// FromTyped converts a typed object to an Object: its JSON, decoded as encoding/json decodes a
// map[string]any. A generated type of sdk/go/k8s is encoded by its own code, and its apiVersion
// and kind are set from its type where it has none (on v too): fake.NewCluster(m,
// must(wasmrec.FromTyped(&deployment))) seeds a fake cluster with it. Any other struct
// (a k8s.io/api one, say) is encoded by encoding/json.
func FromTyped(v any) (*Object, error) {
	var b []byte
	var err error
	if m, ok := v.(codec.Marshaler); ok { // a generated type (sdk/go/k8s): its own encoder
		if k, ok := v.(interface {
			APIVersionKind() (string, string)
			GetKind() string
			SetAPIVersionKind(string, string)
		}); ok && k.GetKind() == "" {
			k.SetAPIVersionKind(k.APIVersionKind())
		}
		b, err = codec.Marshal(m)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return nil, err
	}
	m, err := jsonv.DecodeObject(b)
	if err != nil {
		return nil, err
	}
	return &Object{Object: m}, nil
}

// Into converts the object into a typed struct (a k8s.io/api struct, say), through its JSON,
// written without reflection: the typed struct's own decoding (a Quantity's, a Time's) reads
// JSON, so there is no one pass that keeps it; to read an object typed, GetInto it.
func (o *Object) Into(v any) error {
	b, err := jsonv.Marshal(o.Object)
	if err != nil {
		return err
	}
	if u, ok := v.(codec.Unmarshaler); ok { // a generated type (sdk/go/k8s)
		return codec.UnmarshalKeep(b, u)
	}
	return json.Unmarshal(b, v)
}

// DeepCopy returns a copy of the object that shares nothing with it: maps and arrays are
// copied all the way down, and values of other types (a []string or map[string]string set with
// SetNested, say) become their JSON's ([]any, map[string]any), as the API server would return
// them.
func (o *Object) DeepCopy() *Object {
	if o == nil {
		return nil
	}
	if o.Object == nil {
		return &Object{}
	}
	return &Object{Object: deepCopy(o.Object).(map[string]any)}
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = deepCopy(e)
		}
		return s
	case nil, string, bool, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v // not JSON: nothing the client could send either
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if d.Decode(&out) != nil {
		return v
	}
	return out
}

// MarshalJSON encodes the object, as json.Marshal would its map, without reflection.
func (o *Object) MarshalJSON() ([]byte, error) { return jsonv.Marshal(o.Object) }

// UnmarshalJSON reads a JSON object into o, as json.Unmarshal would read it into its map, so
// that json.Unmarshal(data, &obj) reads what json.Marshal(&obj) wrote. null leaves o as it is.
func (o *Object) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	m, err := jsonv.DecodeObject(data)
	if err != nil {
		return err
	}
	o.Object = m
	return nil
}

// Ref names the object.
func (o *Object) Ref() ObjectRef {
	return ObjectRef{APIVersion: o.APIVersion(), Kind: o.Kind(), Namespace: o.Namespace(), Name: o.Name()}
}

func (o *Object) str(fields ...string) string { s, _ := o.NestedString(fields...); return s }

// APIVersion returns apiVersion.
func (o *Object) APIVersion() string { return o.str("apiVersion") }

// Kind returns kind.
func (o *Object) Kind() string { return o.str("kind") }

// Name returns metadata.name.
func (o *Object) Name() string { return o.str("metadata", "name") }

// Namespace returns metadata.namespace.
func (o *Object) Namespace() string { return o.str("metadata", "namespace") }

// UID returns metadata.uid.
func (o *Object) UID() string { return o.str("metadata", "uid") }

// ResourceVersion returns metadata.resourceVersion.
func (o *Object) ResourceVersion() string { return o.str("metadata", "resourceVersion") }

// Generation returns metadata.generation.
func (o *Object) Generation() int64 { n, _ := o.NestedInt64("metadata", "generation"); return n }

// Labels returns metadata.labels.
func (o *Object) Labels() map[string]string { return o.stringMap("metadata", "labels") }

// Annotations returns metadata.annotations.
func (o *Object) Annotations() map[string]string { return o.stringMap("metadata", "annotations") }

// SetLabels sets metadata.labels; nil removes them. As with unstructured.Unstructured's, an
// object whose metadata is not an object is left as it is.
func (o *Object) SetLabels(labels map[string]string) { o.setStringMap(labels, "metadata", "labels") }

// SetAnnotations sets metadata.annotations; nil removes them, as SetLabels does labels.
func (o *Object) SetAnnotations(annotations map[string]string) {
	o.setStringMap(annotations, "metadata", "annotations")
}

func (o *Object) setStringMap(m map[string]string, fields ...string) {
	if m == nil {
		if parent, ok := o.NestedMap(fields[:len(fields)-1]...); ok {
			delete(parent, fields[len(fields)-1])
		}
		return
	}
	v := make(map[string]any, len(m))
	for k, s := range m {
		v[k] = s
	}
	_ = o.SetNested(v, fields...)
}

func (o *Object) stringMap(fields ...string) map[string]string {
	v, ok := o.Nested(fields...)
	m, _ := v.(map[string]any)
	if !ok || m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// Nested returns the value at the path of fields.
func (o *Object) Nested(fields ...string) (any, bool) {
	var v any = o.Object
	for _, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[f]; !ok {
			return nil, false
		}
	}
	return v, true
}

// NestedString returns the string at the path of fields.
func (o *Object) NestedString(fields ...string) (string, bool) {
	v, ok := o.Nested(fields...)
	s, isString := v.(string)
	return s, ok && isString
}

// NestedInt64 returns the number at the path of fields.
func (o *Object) NestedInt64(fields ...string) (int64, bool) {
	v, ok := o.Nested(fields...)
	switch n := v.(type) {
	case float64:
		return int64(n), ok
	case int64:
		return n, ok
	case int:
		return int64(n), ok
	case json.Number:
		i, err := n.Int64()
		return i, ok && err == nil
	}
	return 0, false
}

// NestedMap returns the object at the path of fields.
func (o *Object) NestedMap(fields ...string) (map[string]any, bool) {
	v, ok := o.Nested(fields...)
	m, isMap := v.(map[string]any)
	return m, ok && isMap
}

// NestedSlice returns the array at the path of fields.
func (o *Object) NestedSlice(fields ...string) ([]any, bool) {
	v, ok := o.Nested(fields...)
	s, isSlice := v.([]any)
	return s, ok && isSlice
}

// SetNested sets the value at the path of fields, creating objects on the way.
func (o *Object) SetNested(value any, fields ...string) error {
	if len(fields) == 0 {
		return fmt.Errorf("SetNested: no fields")
	}
	if o.Object == nil {
		o.Object = map[string]any{}
	}
	m := o.Object
	for i, f := range fields[:len(fields)-1] {
		next, ok := m[f]
		if !ok || next == nil {
			nm := map[string]any{}
			m[f] = nm
			m = nm
			continue
		}
		if m, ok = next.(map[string]any); !ok {
			return fmt.Errorf("SetNested: %s is a %T, not an object", strings.Join(fields[:i+1], "."), next)
		}
	}
	m[fields[len(fields)-1]] = value
	return nil
}

// SetControllerOwner makes owner the controller owner of o, replacing all of o's owner
// references: for an object the plugin builds whole and applies. To add a controller reference
// to an object read from the cluster, keeping its other owners and refusing one another
// controller owns, use controllerutil.SetControllerReference.
func (o *Object) SetControllerOwner(owner *Object) error {
	return o.SetNested([]any{map[string]any{
		"apiVersion": owner.APIVersion(), "kind": owner.Kind(), "name": owner.Name(), "uid": owner.UID(),
		"controller": true, "blockOwnerDeletion": true,
	}}, "metadata", "ownerReferences")
}
