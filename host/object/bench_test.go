package object

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// benchConfigMap is a ConfigMap as a cluster holds one that `kubectl apply` wrote: ten keys of
// data, managedFields and the last-applied annotation.
func benchConfigMap(b testing.TB) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "settings-0042", Namespace: "team-a", UID: "5f0c2a8e-4a1b-4c7e-9d1e-0f7a9b3c2d11",
			ResourceVersion: "123456", CreationTimestamp: metav1.Unix(1767000000, 0),
			Labels: map[string]string{"app.kubernetes.io/name": "settings", "app.kubernetes.io/part-of": "shop"},
		},
		Data: map[string]string{},
	}
	for i := range 10 {
		cm.Data[fmt.Sprintf("key-%d", i)] = fmt.Sprintf("value %d of a setting, long enough to look like one", i)
	}
	applied, _ := json.Marshal(cm)
	cm.Annotations = map[string]string{LastApplied: string(applied)}
	fields := []byte(`{"f:data":{`)
	for i := range 10 {
		if i > 0 {
			fields = append(fields, ',')
		}
		fields = fmt.Appendf(fields, `"f:key-%d":{}`, i)
	}
	fields = append(fields, `},"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{}}}}`...)
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &cm.CreationTimestamp, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields},
	}}
	return cm
}

// BenchmarkDecode compares what the host pays per object event and per guest get, on one
// ConfigMap, for the ways it could hold objects:
//
//   - object: this package; the event decodes the metadata, the get is a copy of Raw.
//   - unstructured: the dynamic client's maps; the event decodes everything, the get encodes.
//   - protobuf: typed objects from protobuf, as controller-runtime's cache holds built-in kinds;
//     a guest's get would have to encode them to JSON.
//   - protobuf-object: what the cache does with built-in kinds: protobuf made into an Object,
//     its JSON encoded once.
//
// "event" is the decode and the dropping of managedFields and last-applied; "get" is what a
// guest's get costs on top; "held" is what the cache keeps per object once the event is
// decoded (live heap, measured over 1000 objects).
func BenchmarkDecode(b *testing.B) {
	cm := benchConfigMap(b)
	js, err := json.Marshal(cm)
	if err != nil {
		b.Fatal(err)
	}
	pbSerializer := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	var pbBuf []byte
	{
		var w bytesWriter
		if err := pbSerializer.Encode(cm, &w); err != nil {
			b.Fatal(err)
		}
		pbBuf = w
	}
	b.Logf("one ConfigMap: %d bytes of JSON, %d of protobuf", len(js), len(pbBuf))

	decoders := []struct {
		name  string
		event func() any
		get   func(any) []byte
	}{
		{"object", func() any {
			o, err := Decode(js)
			if err != nil {
				b.Fatal(err)
			}
			return o
		}, func(o any) []byte { return o.(*Object).Raw }},
		{"unstructured", func() any {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				b.Fatal(err)
			}
			u.SetManagedFields(nil)
			a := u.GetAnnotations()
			delete(a, LastApplied)
			u.SetAnnotations(a)
			return u
		}, func(o any) []byte {
			out, err := json.Marshal(o.(*unstructured.Unstructured).DeepCopy())
			if err != nil {
				b.Fatal(err)
			}
			return out
		}},
		{"protobuf", func() any {
			obj, _, err := pbSerializer.Decode(pbBuf, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			c := obj.(*corev1.ConfigMap)
			c.ManagedFields = nil
			delete(c.Annotations, LastApplied)
			return c
		}, func(o any) []byte {
			out, err := json.Marshal(o)
			if err != nil {
				b.Fatal(err)
			}
			return out
		}},
		{"protobuf-object", func() any {
			obj, _, err := pbSerializer.Decode(pbBuf, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			o, err := FromTyped(obj, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			if err != nil {
				b.Fatal(err)
			}
			return o
		}, func(o any) []byte { return o.(*Object).Raw }},
	}
	for _, d := range decoders {
		b.Run(d.name+"/event", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.event()
			}
		})
		b.Run(d.name+"/get", func(b *testing.B) {
			o := d.event()
			b.ReportAllocs()
			for b.Loop() {
				d.get(o)
			}
		})
		b.Run(d.name+"/held", func(b *testing.B) {
			const n = 1000
			var held []any
			for b.Loop() {
				before := liveHeap()
				held = make([]any, 0, n)
				for range n {
					held = append(held, d.event())
				}
				b.ReportMetric(float64(liveHeap()-before)/n, "B/object")
				runtime.KeepAlive(held)
			}
		})
	}
}

type bytesWriter []byte

func (w *bytesWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
