package object

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const configMap = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm1","namespace":"ns","uid":"u-1",
"resourceVersion":"42","generation":3,"creationTimestamp":"2026-01-02T03:04:05Z",
"labels":{"app":"a"},"annotations":{"keep":"me","kubectl.kubernetes.io/last-applied-configuration":"{\"big\":\"}{][\"}"},
"ownerReferences":[{"apiVersion":"v1","kind":"Secret","name":"s","uid":"u-2"}],
"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}]},
"data":{"a":"x \"quoted\" {brace} [bracket] \\ back","b":"y"}}`

// want is what Decode's Raw must hold: the object, less managedFields.
func want(t *testing.T, in string) map[string]any {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(in)); err != nil {
		t.Fatal(err)
	}
	u.SetManagedFields(nil)
	return u.Object
}

// managedFields are dropped; the last-applied annotation is dropped from the decoded metadata
// only: a guest that updates what it read must not delete it from the server.
func TestDecodeDropsManagedFieldsAndLastApplied(t *testing.T) {
	o, err := Decode([]byte(configMap))
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "cm1" || o.Namespace != "ns" || o.UID != "u-1" || o.Generation != 3 || o.Kind != "ConfigMap" || o.APIVersion != "v1" {
		t.Errorf("metadata: %+v %+v", o.TypeMeta, o.ObjectMeta)
	}
	if !maps.Equal(o.Labels, map[string]string{"app": "a"}) || !maps.Equal(o.Annotations, map[string]string{"keep": "me"}) {
		t.Errorf("labels %v, annotations %v", o.Labels, o.Annotations)
	}
	if len(o.OwnerReferences) != 1 || o.OwnerReferences[0].Name != "s" || o.ManagedFields != nil {
		t.Errorf("owners %v, managedFields %v", o.OwnerReferences, o.ManagedFields)
	}
	if strings.Contains(string(o.Raw), "managedFields") || !strings.Contains(string(o.Raw), LastApplied) {
		t.Errorf("Raw should drop managedFields and keep the last-applied annotation: %s", o.Raw)
	}
	var got map[string]any
	if err := json.Unmarshal(o.Raw, &got); err != nil {
		t.Fatalf("Raw is not JSON: %v: %s", err, o.Raw)
	}
	// Compare through unstructured's decoding, which keeps integers as int64.
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(o.Raw); err != nil {
		t.Fatal(err)
	}
	if w := want(t, configMap); !reflect.DeepEqual(u.Object, w) {
		t.Errorf("Raw decodes to\n%v\nwant\n%v", u.Object, w)
	}
}

func TestDecodeKeepsAnObjectWithNothingToDropAsItCame(t *testing.T) {
	in := ` { "apiVersion" : "v1" , "kind":"ConfigMap", "metadata" : {"name":"a","annotations":{"x":"y"}}, "data": {"k":[1,2,{"n":null}]} } `
	o, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(o.Raw) != in || o.Name != "a" {
		t.Errorf("Raw %q, name %q", o.Raw, o.Name)
	}
}

func TestDecodeEscapedKeysAndOnlyAnnotationInMetadata(t *testing.T) {
	in := `{"apiVersion":"v1","kind":"Secret","met\u0061data":{"name":"s","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}},"type":"Opaque"}`
	o, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "s" || o.Annotations != nil || !strings.Contains(string(o.Raw), "last-applied") {
		t.Errorf("name %q, annotations %v, Raw %s", o.Name, o.Annotations, o.Raw)
	}
}

func TestDecodeRefusesWhatIsNotAnObject(t *testing.T) {
	for _, in := range []string{``, `[]`, `"x"`, `{"metadata":`, `{"metadata":{"name":"a"}`, `{"a" 1}`, `{"metadata":{"name":1}}`, `{"a":"unterminated}`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) gave no error", in)
		}
	}
}

func TestListDecodesItems(t *testing.T) {
	in := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"c"},"items":[` + configMap + `,{"metadata":{"name":"b"}}]}`
	var l List
	if err := json.Unmarshal([]byte(in), &l); err != nil {
		t.Fatal(err)
	}
	if l.ResourceVersion != "7" || l.Continue != "c" || len(l.Items) != 2 || l.Items[0].Name != "cm1" || l.Items[1].Name != "b" {
		t.Fatalf("list %+v", l)
	}
	if strings.Contains(string(l.Items[0].Raw), "managedFields") {
		t.Errorf("item keeps managedFields: %s", l.Items[0].Raw)
	}
	c := l.DeepCopyObject().(*List)
	c.Items[0].Labels["app"] = "changed"
	if l.Items[0].Labels["app"] != "a" {
		t.Error("DeepCopyObject shares labels")
	}
}

// FuzzDecode checks Decode against unstructured's decoding on any JSON object.
func FuzzDecode(f *testing.F) {
	f.Add(configMap)
	f.Add(`{"metadata":{"name":"a","managedFields":[]},"x":["}",{"\"":"]"}]}`)
	f.Add(`{"a":1e5,"b":true,"c":null,"metadata":{}}`)
	f.Add(`{"metadata":{"managedFields":[],"name":"a","managedFields":[{}]}}`)
	f.Fuzz(func(t *testing.T, in string) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(in)); err != nil {
			return
		}
		for _, k := range []string{"apiVersion", "kind"} {
			if v, ok := u.Object[k]; ok {
				if _, ok := v.(string); !ok {
					return // not a string: an error for Decode, not for unstructured
				}
			}
		}
		var meta metav1.ObjectMeta
		if m, ok := u.Object["metadata"]; ok {
			b, _ := json.Marshal(m)
			if json.Unmarshal(b, &meta) != nil {
				return // metadata that does not decode is an error for both
			}
		}
		o, err := Decode([]byte(in))
		if err != nil {
			t.Fatalf("Decode(%q): %v, but it is an object", in, err)
		}
		if o.Name != meta.Name || o.Namespace != meta.Namespace {
			t.Errorf("Decode(%q) name %q/%q, want %q/%q", in, o.Namespace, o.Name, meta.Namespace, meta.Name)
		}
		got := &unstructured.Unstructured{}
		if err := got.UnmarshalJSON(o.Raw); err != nil {
			t.Fatalf("Decode(%q).Raw = %q does not decode: %v", in, o.Raw, err)
		}
		if m, ok := u.Object["metadata"].(map[string]any); ok {
			delete(m, "managedFields")
		}
		if !reflect.DeepEqual(got.Object, u.Object) {
			t.Errorf("Decode(%q).Raw = %q", in, o.Raw)
		}
		if a, err := Answer([]byte(in)); err != nil || !bytes.Equal(a, o.Raw) {
			t.Errorf("Answer(%q) = %q, %v; Decode's Raw is %q", in, a, err, o.Raw)
		}
	})
}

// A write's answer is cut as a decoded object's JSON is, and keeps the last-applied annotation.
func TestAnswerIsTheJSONDecodeKeeps(t *testing.T) {
	o, err := Decode([]byte(configMap))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Answer([]byte(configMap))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, o.Raw) || strings.Contains(string(a), "managedFields") || !strings.Contains(string(a), LastApplied) {
		t.Errorf("Answer = %s\nwant Decode's Raw %s", a, o.Raw)
	}
	if _, err := Answer([]byte(`["not", "an object"]`)); err == nil {
		t.Error("Answer took an array")
	}
}

func TestFromTypedEncodesTheObjectOnce(t *testing.T) {
	cm := benchConfigMap(t)
	cm.TypeMeta = metav1.TypeMeta{} // as protobuf decodes it
	cm.Annotations["keep"] = "me"
	o, err := FromTyped(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Kind != "ConfigMap" || o.APIVersion != "v1" || o.Name != "settings-0042" || o.ManagedFields != nil || !maps.Equal(o.Annotations, map[string]string{"keep": "me"}) {
		t.Errorf("object %+v %+v", o.TypeMeta, o.ObjectMeta)
	}
	var got corev1.ConfigMap
	if err := json.Unmarshal(o.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "ConfigMap" || got.APIVersion != "v1" || got.ManagedFields != nil || len(got.Annotations) != 2 || !maps.Equal(got.Data, cm.Data) {
		t.Errorf("Raw decodes to %+v", got)
	}
}
