package v1

import (
	"time"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
)

// Time is a time.Time that JSON writes to the second, in RFC 3339, and the zero time as null.
type Time struct {
	time.Time `json:"-"`
}

// NewTime is a Time of t.
func NewTime(t time.Time) Time { return Time{t} }

// Now is the current time.
func Now() Time { return Time{time.Now()} }

// Date is time.Date as a Time.
func Date(year int, month time.Month, day, hour, min, sec, nsec int, loc *time.Location) Time {
	return Time{time.Date(year, month, day, hour, min, sec, nsec, loc)}
}

// Unix is time.Unix as a Time.
func Unix(sec, nsec int64) Time { return Time{time.Unix(sec, nsec)} }

// IsZero reports the zero time (and a nil *Time).
func (t *Time) IsZero() bool { return t == nil || t.Time.IsZero() }

// Before reports whether t is before u.
func (t *Time) Before(u *Time) bool {
	if t != nil && u != nil {
		return t.Time.Before(u.Time)
	}
	return false
}

// Equal reports the same instant (two nil Times are equal).
func (t *Time) Equal(u *Time) bool {
	if t == nil && u == nil {
		return true
	}
	if t != nil && u != nil {
		return t.Time.Equal(u.Time)
	}
	return false
}

// Rfc3339Copy is t as JSON keeps it: to the second.
func (t Time) Rfc3339Copy() Time {
	c, _ := time.Parse(time.RFC3339, t.Format(time.RFC3339))
	return Time{c}
}

// DecodeJSON reads an RFC 3339 time; null is the zero time.
func (t *Time) DecodeJSON(d *codec.Decoder) { t.Time = decodeTime(d, time.RFC3339) }

// EncodeJSON writes the time in UTC to the second, or null.
func (t *Time) EncodeJSON(e *codec.Encoder) { encodeTime(e, t.Time, time.RFC3339) }

// DeepCopyInto copies t into out.
func (t *Time) DeepCopyInto(out *Time) { *out = *t }

// DeepCopy is a copy of t.
func (t *Time) DeepCopy() *Time {
	if t == nil {
		return nil
	}
	out := *t
	return &out
}

// MicroTime is a Time that JSON writes to the microsecond.
type MicroTime struct {
	time.Time `json:"-"`
}

// NewMicroTime is a MicroTime of t.
func NewMicroTime(t time.Time) MicroTime { return MicroTime{t} }

// NowMicro is the current time.
func NowMicro() MicroTime { return MicroTime{time.Now()} }

// IsZero reports the zero time (and a nil *MicroTime).
func (t *MicroTime) IsZero() bool { return t == nil || t.Time.IsZero() }

// DecodeJSON reads an RFC 3339 time with microseconds; null is the zero time.
func (t *MicroTime) DecodeJSON(d *codec.Decoder) { t.Time = decodeTime(d, RFC3339Micro) }

// EncodeJSON writes the time in UTC to the microsecond, or null.
func (t *MicroTime) EncodeJSON(e *codec.Encoder) { encodeTime(e, t.Time, RFC3339Micro) }

// DeepCopyInto copies t into out.
func (t *MicroTime) DeepCopyInto(out *MicroTime) { *out = *t }

func decodeTime(d *codec.Decoder, layout string) time.Time {
	var s string
	if d.Null() {
		return time.Time{}
	}
	codec.ReadString(&s, d)
	if d.Err() != nil {
		return time.Time{}
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		d.Fail(err)
		return time.Time{}
	}
	return t.Local()
}

func encodeTime(e *codec.Encoder, t time.Time, layout string) {
	if t.IsZero() {
		e.Null()
		return
	}
	e.String(t.UTC().Format(layout))
}

// Duration is a time.Duration that JSON writes as a string: "1m30s".
type Duration struct {
	time.Duration `json:"-"`
}

// DecodeJSON reads a duration string; null is refused, as k8s.io/apimachinery refuses it.
func (x *Duration) DecodeJSON(d *codec.Decoder) {
	var s string
	if d.Null() {
		d.Fail(&codec.SyntaxError{Msg: "a Duration cannot be null"})
		return
	}
	codec.ReadString(&s, d)
	if d.Err() != nil {
		return
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fail(err)
		return
	}
	x.Duration = v
}

// EncodeJSON writes the duration as time.Duration.String does.
func (x *Duration) EncodeJSON(e *codec.Encoder) { e.String(x.Duration.String()) }

// DeepCopyInto copies x into out.
func (x *Duration) DeepCopyInto(out *Duration) { *out = *x }

// FieldsV1 is a managed-fields entry's set of fields, kept as the JSON the API server wrote.
type FieldsV1 struct {
	Raw []byte `json:"-"`
}

// DecodeJSON keeps the value's JSON; a null leaves Raw as it was.
func (x *FieldsV1) DecodeJSON(d *codec.Decoder) {
	if d.Null() {
		return
	}
	if raw := d.Raw(); raw != nil {
		x.Raw = raw
	}
}

// EncodeJSON writes Raw, or null.
func (x *FieldsV1) EncodeJSON(e *codec.Encoder) { e.Raw(x.Raw) }

// DeepCopyInto copies x into out.
func (x *FieldsV1) DeepCopyInto(out *FieldsV1) {
	*out = *x
	if x.Raw != nil {
		out.Raw = append([]byte(nil), x.Raw...)
	}
}

// MarshalJSON and UnmarshalJSON give encoding/json the same JSON as the generated code. They
// call EncodeJSON directly, not through codec.Marshal's interface: a module that only reads
// objects then keeps no generated encoder (the linker keeps a method an interface call may
// reach on every type converted to an interface).
func (t Time) MarshalJSON() ([]byte, error) {
	var e codec.Encoder
	t.EncodeJSON(&e)
	return e.Bytes()
}
func (t *Time) UnmarshalJSON(b []byte) error { return codec.Unmarshal(b, t) }
func (t MicroTime) MarshalJSON() ([]byte, error) {
	var e codec.Encoder
	t.EncodeJSON(&e)
	return e.Bytes()
}
func (t *MicroTime) UnmarshalJSON(b []byte) error { return codec.Unmarshal(b, t) }
func (x Duration) MarshalJSON() ([]byte, error) {
	var e codec.Encoder
	x.EncodeJSON(&e)
	return e.Bytes()
}
func (x *Duration) UnmarshalJSON(b []byte) error { return codec.Unmarshal(b, x) }
func (x FieldsV1) MarshalJSON() ([]byte, error) {
	var e codec.Encoder
	x.EncodeJSON(&e)
	return e.Bytes()
}
func (x *FieldsV1) UnmarshalJSON(b []byte) error { return codec.Unmarshal(b, x) }
