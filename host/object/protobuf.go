package object

import (
	"bytes"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"
)

// protobufSerializer writes the Kubernetes protobuf envelope ("k8s\x00", then a runtime.Unknown)
// of client-go's built-in kinds, as the API server sends application/vnd.kubernetes.protobuf.
var protobufSerializer = protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)

// Protobuf returns the object, of kind gvk, in the Kubernetes protobuf envelope; ok is false if
// it cannot be (see ProtobufOf). It is made once per Object, on the first call, and kept whatever
// gvk a later call gives (an Object is of one kind): an Object is immutable, and the cache
// replaces it when the object changes. Concurrent first calls may each make it; one is kept.
func (o *Object) Protobuf(gvk schema.GroupVersionKind) ([]byte, bool) {
	if p := o.protobuf.Load(); p != nil {
		return *p, len(*p) > 0
	}
	b, ok := ProtobufOf(gvk, o.Raw)
	if !ok {
		b = []byte{}
	}
	o.protobuf.Store(&b)
	return b, ok
}

// ProtobufOf converts an object's JSON, of kind gvk, to the Kubernetes protobuf envelope. ok is
// false if client-go's scheme has no Go type of gvk (a CRD's kind), the type has no protobuf
// encoding, or the JSON has a field the type does not (an API server newer than the host's types:
// the protobuf would lose it), or is not the type's JSON.
func ProtobufOf(gvk schema.GroupVersionKind, raw []byte) ([]byte, bool) {
	obj, ok := Typed(gvk, raw)
	if !ok {
		return nil, false
	}
	return EncodeProtobuf(obj)
}

// Typed decodes an object's JSON into a new object of gvk's Go type in client-go's scheme; ok
// is false as for ProtobufOf.
func Typed(gvk schema.GroupVersionKind, raw []byte) (obj runtime.Object, ok bool) {
	obj, err := kubescheme.Scheme.New(gvk)
	if err != nil {
		return nil, false
	}
	if strict, err := sigsjson.UnmarshalStrict(raw, obj, sigsjson.DisallowUnknownFields); err != nil || len(strict) > 0 {
		return nil, false
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, true
}

// EncodeProtobuf writes a typed object in the Kubernetes protobuf envelope; ok is false if its
// type has no protobuf encoding.
func EncodeProtobuf(obj runtime.Object) ([]byte, bool) {
	var buf bytes.Buffer
	if err := protobufSerializer.Encode(obj, &buf); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}
