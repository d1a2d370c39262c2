package kubeanswer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// protobufPrefix starts an answer in the Kubernetes protobuf encoding.
var protobufPrefix = []byte("k8s\x00")

// Object reads an object a get, create, update or patch answered, JSON or protobuf.
func Object(b []byte) (map[string]any, error) {
	if bytes.HasPrefix(b, protobufPrefix) {
		obj, err := decodeProtobuf(b)
		if err != nil {
			return nil, err
		}
		return obj, nil
	}
	var o map[string]any
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	return o, nil
}

// Items reads the items of a list a host call answered, JSON or protobuf.
func Items(b []byte) ([]map[string]any, error) {
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if bytes.HasPrefix(b, protobufPrefix) {
		o, err := decodeProtobuf(b)
		if err != nil {
			return nil, err
		}
		kind, _ := o["kind"].(string)
		apiVersion, _ := o["apiVersion"].(string)
		raw, _ := json.Marshal(o)
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
		for _, it := range list.Items { // a List's items carry no TypeMeta in protobuf
			it["apiVersion"], it["kind"] = apiVersion, strings.TrimSuffix(kind, "List")
		}
		return list.Items, nil
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// decodeProtobuf decodes an object (or a List) of a built-in kind from the Kubernetes protobuf
// envelope, into its JSON form with apiVersion and kind.
func decodeProtobuf(b []byte) (map[string]any, error) {
	obj, gvk, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(b, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding protobuf: %w", err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	o := (&unstructured.Unstructured{Object: u})
	o.SetAPIVersion(gvk.GroupVersion().String())
	o.SetKind(gvk.Kind)
	if md, ok := o.Object["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp") // the converter's zero, which JSON from the API server leaves out
	}
	return o.Object, nil
}
