package codec

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"

	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

// Marshaler is a type with a generated encoder.
type Marshaler interface {
	EncodeJSON(e *Encoder)
}

// Marshal encodes v as json.Marshal would.
func Marshal(v Marshaler) ([]byte, error) {
	var e Encoder
	v.EncodeJSON(&e)
	return e.Bytes()
}

// Encoder writes one JSON document for generated encoders. It puts the commas between members
// and elements itself. A value JSON cannot hold (a NaN) is the error Bytes returns.
type Encoder struct {
	buf   []byte
	comma bool // a value was written, so the next member or element needs a comma
	err   error
}

// Bytes is the document written, or the first error.
func (e *Encoder) Bytes() ([]byte, error) {
	if e.err != nil {
		return nil, e.err
	}
	return e.buf, nil
}

// Reset empties e for another document, keeping its buffer.
func (e *Encoder) Reset() { e.buf, e.comma, e.err = e.buf[:0], false, nil }

// The methods generated encoders call for each field (BeginObject, Key, String, Int...) are kept
// out of line (go:noinline). Inlined, each copied its append and the slice's growth into every
// encoder, once per field: the encoders of a module with batch/v1's CronJob and Job were 987 KB
// of wasm code, and 157 KB so; encoding a Deployment in a guest took 55 µs, and 37 µs so.

func (e *Encoder) sep() {
	if e.comma {
		e.buf = append(e.buf, ',')
	}
}

// firstCap is the buffer a document starts with: a host call's request or a small object fits,
// where growing from nothing would allocate five times on the way to 128 bytes.
const firstCap = 256

// BeginObject writes {.
//
//go:noinline
func (e *Encoder) BeginObject() {
	if e.buf == nil {
		e.buf = make([]byte, 0, firstCap)
	}
	e.sep()
	e.buf = append(e.buf, '{')
	e.comma = false
}

// EndObject writes }.
//
//go:noinline
func (e *Encoder) EndObject() {
	e.buf = append(e.buf, '}')
	e.comma = true
}

// BeginArray writes [.
//
//go:noinline
func (e *Encoder) BeginArray() {
	e.sep()
	e.buf = append(e.buf, '[')
	e.comma = false
}

// EndArray writes ].
//
//go:noinline
func (e *Encoder) EndArray() {
	e.buf = append(e.buf, ']')
	e.comma = true
}

// Key writes a member's key: quotedKey is the key as JSON, with its quotes and the colon after
// it ("name":), as generated code has it written out already.
//
//go:noinline
func (e *Encoder) Key(quotedKey string) {
	e.sep()
	e.buf = append(e.buf, quotedKey...)
	e.comma = false
}

// KeyString writes a member's key from its text (a map key).
func (e *Encoder) KeyString(k string) {
	e.sep()
	e.buf = jsonv.AppendString(e.buf, k)
	e.buf = append(e.buf, ':')
	e.comma = false
}

// Null writes null.
//
//go:noinline
func (e *Encoder) Null() {
	e.sep()
	e.buf = append(e.buf, "null"...)
	e.comma = true
}

// String writes a string, escaped as encoding/json escapes it.
//
//go:noinline
func (e *Encoder) String(s string) {
	e.sep()
	e.buf = jsonv.AppendString(e.buf, s)
	e.comma = true
}

// Bool writes true or false.
//
//go:noinline
func (e *Encoder) Bool(b bool) {
	e.sep()
	e.buf = strconv.AppendBool(e.buf, b)
	e.comma = true
}

// Int writes an integer.
//
//go:noinline
func (e *Encoder) Int(v int64) {
	e.sep()
	e.buf = strconv.AppendInt(e.buf, v, 10)
	e.comma = true
}

// Uint writes an unsigned integer.
//
//go:noinline
func (e *Encoder) Uint(v uint64) {
	e.sep()
	e.buf = strconv.AppendUint(e.buf, v, 10)
	e.comma = true
}

// Float writes a float64 as encoding/json does.
func (e *Encoder) Float(f float64) {
	e.sep()
	b, ok := jsonv.AppendFloat(e.buf, f)
	if !ok && e.err == nil {
		e.err = fmt.Errorf("json: unsupported value: %v", f)
	}
	e.buf = b
	e.comma = true
}

// Bytes64 writes b as a base64 string, as encoding/json writes a []byte; nil is null.
func (e *Encoder) Bytes64(b []byte) {
	if b == nil {
		e.Null()
		return
	}
	e.sep()
	e.buf = append(e.buf, '"')
	e.buf = base64.StdEncoding.AppendEncode(e.buf, b)
	e.buf = append(e.buf, '"')
	e.comma = true
}

// Raw writes JSON that is already encoded (a RawExtension's), compacted as encoding/json
// compacts what a MarshalJSON method returns; empty is null.
func (e *Encoder) Raw(b []byte) {
	if len(b) == 0 {
		e.Null()
		return
	}
	e.sep()
	start := len(e.buf)
	e.buf = append(e.buf, b...)
	if out, err := compact(e.buf[:start], b); err != nil {
		e.buf = e.buf[:start]
		if e.err == nil {
			e.err = err
		}
	} else {
		e.buf = out
	}
	e.comma = true
}

// WriteString writes a string of a named string type.
func WriteString[T ~string](p *T, e *Encoder) { e.String(string(*p)) }

// WriteBool writes a bool of a named bool type.
func WriteBool[T ~bool](p *T, e *Encoder) { e.Bool(bool(*p)) }

// WriteInt32 writes an int32 of a named type.
func WriteInt32[T ~int32](p *T, e *Encoder) { e.Int(int64(*p)) }

// WriteInt64 writes an int64 of a named type.
func WriteInt64[T ~int64](p *T, e *Encoder) { e.Int(int64(*p)) }

// WriteInt writes an int of a named type.
func WriteInt[T ~int](p *T, e *Encoder) { e.Int(int64(*p)) }

// WriteUint64 writes a uint64 of a named type.
func WriteUint64[T ~uint64](p *T, e *Encoder) { e.Uint(uint64(*p)) }

// WriteFloat64 writes a float64 of a named type.
func WriteFloat64[T ~float64](p *T, e *Encoder) { e.Float(float64(*p)) }

// WriteBytes writes a []byte as base64.
func WriteBytes(p *[]byte, e *Encoder) { e.Bytes64(*p) }

// WritePtr writes the value p points to, or null.
func WritePtr[T any](p **T, e *Encoder, write func(*T, *Encoder)) {
	if *p == nil {
		e.Null()
		return
	}
	write(*p, e)
}

// WriteSlice writes a slice as an array; nil is null.
func WriteSlice[T any](p *[]T, e *Encoder, write func(*T, *Encoder)) {
	s := *p
	if s == nil {
		e.Null()
		return
	}
	e.BeginArray()
	for i := range s {
		write(&s[i], e)
	}
	e.EndArray()
}

// WriteMap writes a map as an object with its keys sorted, as encoding/json does; nil is null.
func WriteMap[K ~string, V any](p *map[K]V, e *Encoder, write func(*V, *Encoder)) {
	m := *p
	if m == nil {
		e.Null()
		return
	}
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.BeginObject()
	for _, k := range keys {
		e.KeyString(string(k))
		v := m[k]
		write(&v, e)
	}
	e.EndObject()
}
