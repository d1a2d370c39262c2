package runtime

import "github.com/wasmrec/wasmrec/sdk/go/codec"

// Object is a Kubernetes object of a kind: every generated kind is one.
type Object interface {
	// APIVersionKind is the apiVersion and kind of the object's type.
	APIVersionKind() (apiVersion, kind string)
	DeepCopyObject() Object
}

// RawExtension is a field that holds an object of any kind as its JSON (an admission review's
// object, a ControllerRevision's data).
type RawExtension struct {
	// Raw is the JSON of the object; nil writes null.
	Raw []byte `json:"-"`
}

// DecodeJSON reads the value as it is: a null leaves Raw as it was, as k8s.io/apimachinery does.
func (x *RawExtension) DecodeJSON(d *codec.Decoder) {
	if d.Null() {
		return
	}
	if raw := d.Raw(); raw != nil {
		x.Raw = raw
	}
}

// EncodeJSON writes Raw, compacted; nil is null.
func (x *RawExtension) EncodeJSON(e *codec.Encoder) { e.Raw(x.Raw) }

// DeepCopyInto copies x into out.
func (x *RawExtension) DeepCopyInto(out *RawExtension) {
	*out = *x
	if x.Raw != nil {
		out.Raw = append([]byte(nil), x.Raw...)
	}
}

// DeepCopy is a copy of x.
func (x *RawExtension) DeepCopy() *RawExtension {
	if x == nil {
		return nil
	}
	out := new(RawExtension)
	x.DeepCopyInto(out)
	return out
}

// MarshalJSON and UnmarshalJSON give encoding/json the same JSON as the generated code
// (MarshalJSON calls EncodeJSON directly: see metav1.Time's).
func (x RawExtension) MarshalJSON() ([]byte, error) {
	var e codec.Encoder
	x.EncodeJSON(&e)
	return e.Bytes()
}

func (x *RawExtension) UnmarshalJSON(b []byte) error { return codec.Unmarshal(b, x) }
