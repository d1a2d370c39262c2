package intstr

import (
	"strconv"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
)

// Type says which of the two an IntOrString holds.
type Type int64

const (
	Int    Type = iota // IntVal
	String             // StrVal
)

// IntOrString holds an int32 or a string.
type IntOrString struct {
	Type   Type
	IntVal int32
	StrVal string
}

// FromInt32 is an IntOrString holding an integer.
func FromInt32(v int32) IntOrString { return IntOrString{Type: Int, IntVal: v} }

// FromInt is an IntOrString holding an integer (which must fit an int32).
func FromInt(v int) IntOrString { return FromInt32(int32(v)) }

// FromString is an IntOrString holding a string.
func FromString(v string) IntOrString { return IntOrString{Type: String, StrVal: v} }

// Parse is an IntOrString of the integer v spells, or else of the string v.
func Parse(v string) IntOrString {
	i, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return FromString(v)
	}
	return FromInt32(int32(i))
}

// String is the string, or the integer in decimal.
func (x *IntOrString) String() string {
	if x == nil {
		return "<nil>"
	}
	if x.Type == String {
		return x.StrVal
	}
	return strconv.Itoa(x.IntValue())
}

// IntValue is the integer, or the string read as one (0 if it is not).
func (x *IntOrString) IntValue() int {
	if x.Type == String {
		i, _ := strconv.Atoi(x.StrVal)
		return i
	}
	return int(x.IntVal)
}

// DecodeJSON reads a string or an integer; a null makes it an Int that keeps its value, as
// k8s.io/apimachinery does.
func (x *IntOrString) DecodeJSON(d *codec.Decoder) {
	if d.Next() == '"' {
		x.Type = String
		codec.ReadString(&x.StrVal, d)
		return
	}
	x.Type = Int
	codec.ReadInt32(&x.IntVal, d)
}

// EncodeJSON writes the integer or the string.
func (x *IntOrString) EncodeJSON(e *codec.Encoder) {
	if x.Type == String {
		e.String(x.StrVal)
		return
	}
	e.Int(int64(x.IntVal))
}

// DeepCopyInto copies x into out.
func (x *IntOrString) DeepCopyInto(out *IntOrString) { *out = *x }

// DeepCopy is a copy of x.
func (x *IntOrString) DeepCopy() *IntOrString {
	if x == nil {
		return nil
	}
	out := *x
	return &out
}

// MarshalJSON and UnmarshalJSON give encoding/json the same JSON as the generated code
// (MarshalJSON calls EncodeJSON directly: see metav1.Time's).
func (x IntOrString) MarshalJSON() ([]byte, error) {
	var e codec.Encoder
	x.EncodeJSON(&e)
	return e.Bytes()
}

func (x *IntOrString) UnmarshalJSON(b []byte) error { return codec.Unmarshal(b, x) }
