package resource

import (
	"fmt"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
)

// Quantity is an amount in Kubernetes' notation.
type Quantity struct {
	s string
}

// ParseQuantity checks s's grammar (a signed decimal number, then a suffix: Ki Mi Gi Ti Pi Ei,
// n u m k M G T P E, or e/E and an exponent) and returns its Quantity.
func ParseQuantity(s string) (Quantity, error) {
	if !valid(s) {
		return Quantity{}, fmt.Errorf("quantity %q: not a number with an optional suffix (Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e and an exponent)", s)
	}
	return Quantity{s: s}, nil
}

// MustParse is ParseQuantity that panics on a bad quantity: for literals.
func MustParse(s string) Quantity {
	q, err := ParseQuantity(s)
	if err != nil {
		panic(err)
	}
	return q
}

// String is the quantity as it was written; "0" for the zero Quantity.
func (q *Quantity) String() string {
	if q.s == "" {
		return "0"
	}
	return q.s
}

// IsZero reports a Quantity never set.
func (q *Quantity) IsZero() bool { return q.s == "" }

// Equal reports two quantities written alike.
func (q Quantity) Equal(o Quantity) bool { return q.String() == o.String() }

func valid(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	switch suffix := s[i:]; suffix {
	case "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E":
		return true
	default:
		if suffix[0] != 'e' && suffix[0] != 'E' {
			return false
		}
		j := 1
		if j < len(suffix) && (suffix[j] == '+' || suffix[j] == '-') {
			j++
		}
		if j == len(suffix) {
			return false
		}
		for ; j < len(suffix); j++ {
			if suffix[j] < '0' || suffix[j] > '9' {
				return false
			}
		}
		return true
	}
}

// DecodeJSON reads a quantity written as a string or a number; null is the zero Quantity.
func (q *Quantity) DecodeJSON(d *codec.Decoder) {
	if d.Null() {
		*q = Quantity{}
		return
	}
	var s string
	if c := d.Next(); c == '"' {
		codec.ReadString(&s, d)
	} else if c == '-' || c >= '0' && c <= '9' {
		s = string(d.Raw())
	} else {
		codec.ReadString(&s, d) // its error
		return
	}
	if d.Err() != nil {
		return
	}
	p, err := ParseQuantity(s)
	if err != nil {
		d.Fail(err)
		return
	}
	*q = p
}

// EncodeJSON writes the quantity as a string.
func (q *Quantity) EncodeJSON(e *codec.Encoder) { e.String(q.String()) }

// DeepCopyInto copies q into out.
func (q *Quantity) DeepCopyInto(out *Quantity) { *out = *q }

// DeepCopy is a copy of q.
func (q Quantity) DeepCopy() Quantity { return q }

// MarshalJSON and UnmarshalJSON give encoding/json the same JSON as the generated code
// (MarshalJSON calls EncodeJSON directly: see metav1.Time's).
func (q Quantity) MarshalJSON() ([]byte, error) {
	var e codec.Encoder
	q.EncodeJSON(&e)
	return e.Bytes()
}

func (q *Quantity) UnmarshalJSON(b []byte) error { return codec.Unmarshal(b, q) }
