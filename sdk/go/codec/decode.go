package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

// Unmarshaler is a type with a generated decoder.
type Unmarshaler interface {
	DecodeJSON(d *Decoder)
}

// Unmarshal decodes data into v: one JSON value, and nothing after it but white space. The
// strings decoded share one copy of data, made at the first of them: the caller may reuse data.
func Unmarshal(data []byte, v Unmarshaler) error {
	return unmarshal(NewDecoder(data), v)
}

// UnmarshalKeep is Unmarshal without the copy: the strings decoded share data itself, which v
// then keeps alive, and which nothing may modify afterwards. It is for data nothing else holds,
// such as a host call's answer (package client decodes those with it).
func UnmarshalKeep(data []byte, v Unmarshaler) error {
	d := NewDecoder(data)
	d.text = data
	return unmarshal(d, v)
}

func unmarshal(d *Decoder, v Unmarshaler) error {
	v.DecodeJSON(d)
	if d.err == nil && d.peek() != 0 {
		d.fail("data after the value")
	}
	return d.err
}

// Decoder reads one JSON document for generated decoders. Its first error ends the reading:
// every read after it reads nothing and returns the zero value, so that generated code need not
// check each one, and Err returns it.
//
// The common tokens (white space, keys and strings of printable ASCII without escapes,
// integers) are read here, in few calls, which matters most in a wasm guest, where a call costs
// several times what it costs natively; the rest (escapes, other UTF-8, fractions, skipped
// values) is read by jsonv.Text at the same offset.
type Decoder struct {
	data []byte
	pos  int
	// text is a copy of data, made at the first string read, that the strings read share.
	text []byte
	slow *jsonv.Text
	err  error
}

// NewDecoder returns a Decoder at the start of data.
func NewDecoder(data []byte) *Decoder { return &Decoder{data: data} }

// peek skips white space and returns the next byte, or 0 at the end.
func (d *Decoder) peek() byte {
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; c {
		case ' ', '\n', '\r', '\t':
			d.pos++
		default:
			return c
		}
	}
	return 0
}

// textAt is jsonv's reader at d's offset, for what the fast paths leave; the caller moves d.pos
// to the reader's Pos after it reads.
func (d *Decoder) textAt() *jsonv.Text {
	if d.slow == nil {
		d.slow = jsonv.NewText(d.data)
	}
	d.slow.SetPos(d.pos)
	return d.slow
}

// readString reads the string whose quote is at d.pos.
func (d *Decoder) readString() (string, bool) {
	start := d.pos + 1
	i := start
	// Eight bytes at a time while none of them ends the fast path: a quote, a backslash, a
	// control character or a byte of non-ASCII UTF-8. In a wasm guest this is seven times
	// quicker than a byte at a time.
	for ; i+8 <= len(d.data); i += 8 {
		if !plainASCII(binary.LittleEndian.Uint64(d.data[i:])) {
			break
		}
	}
	for ; i < len(d.data); i++ {
		c := d.data[i]
		if c == '"' {
			d.pos = i + 1
			if i == start {
				return "", true
			}
			if d.text == nil {
				d.text = bytes.Clone(d.data)
			}
			return unsafe.String(&d.text[start], i-start), true
		}
		if c == '\\' || c < ' ' || c >= utf8.RuneSelf {
			break
		}
	}
	t := d.textAt()
	s, ok := t.String()
	d.pos = t.Pos()
	return s, ok
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainASCII reports whether none of x's eight bytes is a quote, a backslash, a control
// character or above 0x7f. A byte b below n (n <= 0x80) is one whose b-n borrows into its high
// bit while b's own high bit is clear; a byte equal to c is one below 1 once xored with c.
func plainASCII(x uint64) bool {
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	return ((quote-ones)&^quote|(backslash-ones)&^backslash|(x-ones*' ')&^x|x)&highs == 0
}

// literal reads lit at d.pos.
func (d *Decoder) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return false
	}
	d.pos += len(lit)
	return true
}

// Err is the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// SyntaxError is JSON that is not well formed, or a value not of the type its field holds.
type SyntaxError struct {
	Offset int // of the byte where the reading stopped
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("json: at offset %d: %s", e.Offset, e.Msg) }

// Fail ends the reading with err (the first error is kept).
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.pos = len(d.data)
}

func (d *Decoder) fail(msg string) {
	if d.err == nil {
		d.Fail(&SyntaxError{Offset: d.pos, Msg: msg})
	}
}

// what names the JSON value at b, for an error.
func what(b byte) string {
	switch b {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 0:
		return "the end of the input"
	default:
		if b == '-' || b >= '0' && b <= '9' {
			return "a number"
		}
		return fmt.Sprintf("%q", b)
	}
}

func (d *Decoder) wrongType(want string) {
	d.fail(fmt.Sprintf("cannot read %s into %s", what(d.peek()), want))
}

// Next is the first byte of the next value ('{', '"', 'n' for null...) without reading it:
// 0 at the end of the input or after an error.
func (d *Decoder) Next() byte {
	if d.err != nil {
		return 0
	}
	return d.peek()
}

// Null reads a null if one is next, and reports whether it did.
func (d *Decoder) Null() bool {
	if d.err != nil || d.peek() != 'n' {
		return false
	}
	if !d.literal("null") {
		d.fail("invalid literal")
	}
	return true
}

// Object starts reading an object: false for a null (read) or after an error. Then
// Member(0), Member(1)... read its members' keys until one returns false.
func (d *Decoder) Object() bool {
	if d.Null() || d.err != nil {
		return false
	}
	if d.peek() != '{' {
		d.wrongType("an object")
		return false
	}
	d.pos++
	return true
}

// Member reads the key of the object's i'th member (from 0) and the colon after it, and
// reports false at the object's end. The member's value is read next: a field's, or Skip.
func (d *Decoder) Member(i int) (key string, ok bool) {
	if d.err != nil {
		return "", false
	}
	c := d.peek()
	if c == '}' {
		d.pos++
		return "", false
	}
	if i > 0 {
		if c != ',' {
			d.fail("expected , or } after an object member")
			return "", false
		}
		d.pos++
		c = d.peek()
	}
	if c != '"' {
		d.fail("expected an object key")
		return "", false
	}
	key, ok = d.readString()
	if !ok {
		d.fail("invalid string")
		return "", false
	}
	if d.peek() != ':' {
		d.fail("expected : after an object key")
		return "", false
	}
	d.pos++
	return key, true
}

// Array starts reading an array: false for a null (read) or after an error. Then Elem(0),
// Elem(1)... report whether another element is next.
func (d *Decoder) Array() bool {
	if d.Null() || d.err != nil {
		return false
	}
	if d.peek() != '[' {
		d.wrongType("an array")
		return false
	}
	d.pos++
	return true
}

// Elem reports whether the array's i'th element (from 0) is next, reading the comma before it.
func (d *Decoder) Elem(i int) bool {
	if d.err != nil {
		return false
	}
	c := d.peek()
	if c == ']' {
		d.pos++
		return false
	}
	if i > 0 {
		if c != ',' {
			d.fail("expected , or ] after an array element")
			return false
		}
		d.pos++
	}
	return true
}

// Skip reads a value of any kind and keeps nothing of it: an unknown field's.
func (d *Decoder) Skip() {
	if d.err != nil {
		return
	}
	t := d.textAt()
	ok := t.Skip()
	d.pos = t.Pos()
	if !ok {
		d.fail("invalid JSON")
	}
}

// Raw reads a value of any kind and returns a copy of its JSON, as it was written.
func (d *Decoder) Raw() []byte {
	if d.err != nil {
		return nil
	}
	d.peek()
	start := d.pos
	d.Skip()
	if d.err != nil {
		return nil
	}
	return append([]byte(nil), d.data[start:d.pos]...)
}

// str reads a string, or leaves ok false for a null.
func (d *Decoder) str(want string) (string, bool) {
	if d.err != nil {
		return "", false
	}
	switch d.peek() {
	case '"':
		s, ok := d.readString()
		if !ok {
			d.fail("invalid string")
		}
		return s, ok
	case 'n':
		d.Null()
		return "", false
	}
	d.wrongType(want)
	return "", false
}

// ReadString reads a string into *p; a null leaves *p as it is, as encoding/json does.
func ReadString[T ~string](p *T, d *Decoder) {
	if s, ok := d.str("a string"); ok {
		*p = T(s)
	}
}

// ReadBool reads true or false into *p; a null leaves *p as it is.
func ReadBool[T ~bool](p *T, d *Decoder) {
	if d.Null() || d.err != nil {
		return
	}
	switch d.peek() {
	case 't':
		if d.literal("true") {
			*p = true
			return
		}
	case 'f':
		if d.literal("false") {
			*p = false
			return
		}
	default:
		d.wrongType("a boolean")
		return
	}
	d.fail("invalid literal")
}

// number reads a number's text; a null leaves ok false.
func (d *Decoder) number(want string) (text []byte, integer bool, n uint64, ok bool) {
	if d.err != nil {
		return nil, false, 0, false
	}
	c := d.peek()
	if c == 'n' {
		d.Null()
		return nil, false, 0, false
	}
	if c != '-' && (c < '0' || c > '9') {
		d.wrongType(want)
		return nil, false, 0, false
	}
	// A non-negative integer of up to 18 digits, not starting with 0 unless it is 0, ended by
	// something other than a fraction or exponent: read here.
	start, i := d.pos, d.pos
	for ; i < len(d.data) && i-start < 19 && d.data[i] >= '0' && d.data[i] <= '9'; i++ {
		n = n*10 + uint64(d.data[i]-'0')
	}
	if digits := i - start; digits > 0 && digits < 19 && (d.data[start] != '0' || digits == 1) &&
		(i == len(d.data) || d.data[i] != '.' && d.data[i] != 'e' && d.data[i] != 'E' && (d.data[i] < '0' || d.data[i] > '9')) {
		d.pos = i
		return d.data[start:i], true, n, true
	}
	t := d.textAt()
	text, integer, n, ok = t.Number()
	d.pos = t.Pos()
	if !ok {
		d.fail("invalid number")
	}
	return text, integer, n, ok
}

// Int64Value reads an integer; a null leaves ok false. Like encoding/json, it refuses a
// fraction or an exponent (1.0, 1e3) and a value out of the type's range.
func (d *Decoder) Int64Value(bits int) (int64, bool) {
	text, integer, n, ok := d.number("an integer")
	if !ok {
		return 0, false
	}
	if integer && len(text) <= 19 { // n is the exact value
		limit := uint64(1) << (bits - 1)
		if text[0] == '-' && n <= limit {
			return -int64(n), true // for n = 1<<63, MinInt64
		}
		if text[0] != '-' && n < limit {
			return int64(n), true
		}
	}
	v, err := strconv.ParseInt(string(text), 10, bits)
	if err != nil {
		d.fail(fmt.Sprintf("cannot read number %s into int%d", text, bits))
		return 0, false
	}
	return v, true
}

// ReadInt32 reads an integer into *p; a null leaves *p as it is.
func ReadInt32[T ~int32](p *T, d *Decoder) {
	if v, ok := d.Int64Value(32); ok {
		*p = T(v)
	}
}

// ReadInt64 reads an integer into *p; a null leaves *p as it is.
func ReadInt64[T ~int64](p *T, d *Decoder) {
	if v, ok := d.Int64Value(64); ok {
		*p = T(v)
	}
}

// ReadInt reads an integer into *p; a null leaves *p as it is.
func ReadInt[T ~int](p *T, d *Decoder) {
	if v, ok := d.Int64Value(strconv.IntSize); ok {
		*p = T(v)
	}
}

// ReadUint64 reads an unsigned integer into *p; a null leaves *p as it is.
func ReadUint64[T ~uint64](p *T, d *Decoder) {
	text, _, _, ok := d.number("an unsigned integer")
	if !ok {
		return
	}
	v, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil {
		d.fail(fmt.Sprintf("cannot read number %s into uint64", text))
		return
	}
	*p = T(v)
}

// ReadFloat64 reads a number into *p; a null leaves *p as it is.
func ReadFloat64[T ~float64](p *T, d *Decoder) {
	text, integer, n, ok := d.number("a number")
	if !ok {
		return
	}
	if integer && n != 0 && n < 1<<53 {
		v := float64(n)
		if text[0] == '-' {
			v = -v
		}
		*p = T(v)
		return
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		d.fail(fmt.Sprintf("cannot read number %s into float64", text))
		return
	}
	*p = T(v)
}

// ReadBytes reads a base64 string (standard encoding, as encoding/json writes a []byte) into
// *p; a null makes *p nil.
func ReadBytes(p *[]byte, d *Decoder) {
	if d.Null() {
		*p = nil
		return
	}
	s, ok := d.str("a base64 string")
	if !ok {
		return
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, []byte(s))
	if err != nil {
		d.fail("invalid base64: " + err.Error())
		return
	}
	*p = b[:n]
}

// ReadPtr reads a value into the one *p points to, making it if *p is nil; a null makes *p nil.
func ReadPtr[T any](p **T, d *Decoder, read func(*T, *Decoder)) {
	if d.Null() {
		*p = nil
		return
	}
	if d.err != nil {
		return
	}
	if *p == nil {
		*p = new(T)
	}
	read(*p, d)
}

// ReadSlice reads an array into *p, each element from its zero value; a null makes *p nil, and
// [] an empty slice that is not nil, as encoding/json does.
func ReadSlice[T any](p *[]T, d *Decoder, read func(*T, *Decoder)) {
	if d.Null() {
		*p = nil
		return
	}
	if !d.Array() {
		return
	}
	s := (*p)[:0]
	if s == nil {
		s = []T{}
	}
	for i := 0; d.Elem(i); i++ {
		var v T
		read(&v, d)
		s = append(s, v)
	}
	*p = s
}

// ReadMap reads an object into *p, making the map if it is nil; each value is read from its
// zero value. A null makes *p nil.
func ReadMap[K ~string, V any](p *map[K]V, d *Decoder, read func(*V, *Decoder)) {
	m, ok := beginMap(p, d)
	for i := 0; ok; i++ {
		var k string
		if k, ok = d.Member(i); ok {
			var v V
			read(&v, d)
			if ok = d.err == nil; ok {
				m[K(k)] = v
			}
		}
	}
}

// ReadStringMap is ReadMap of a map[string]string, its values read as ReadString reads them,
// without a call for each: maps of strings (labels, annotations, a ConfigMap's data) are the
// most common, and in a wasm guest a call costs several times what it does natively.
func ReadStringMap(p *map[string]string, d *Decoder) {
	m, ok := beginMap(p, d)
	for i := 0; ok; i++ {
		var k string
		if k, ok = d.Member(i); ok {
			v, _ := d.str("a string") // a null is ""
			if ok = d.err == nil; ok {
				m[k] = v
			}
		}
	}
}

// beginMap starts reading an object into *p and returns the map to fill, made if *p is nil; ok
// is false if there is none to read: a null (*p is made nil), another value or an error.
func beginMap[K comparable, V any](p *map[K]V, d *Decoder) (m map[K]V, ok bool) {
	if d.Null() {
		*p = nil
		return nil, false
	}
	if !d.Object() {
		return nil, false
	}
	if *p == nil {
		*p = map[K]V{}
	}
	return *p, true
}
