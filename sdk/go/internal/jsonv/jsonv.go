package jsonv

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// Decode decodes data as json.Unmarshal into an `any` does. On error the value is nil.
func Decode(data []byte) (any, error) {
	v, ok := decodeFast(data)
	if ok {
		return v, nil
	}
	return decodeStd(data)
}

// DecodeObject decodes data as json.Unmarshal into a map[string]any does: a JSON object, or null
// (a nil map). On error the map is nil.
func DecodeObject(data []byte) (map[string]any, error) {
	v, ok := decodeFast(data)
	if ok {
		if m, isMap := v.(map[string]any); isMap || v == nil {
			return m, nil
		}
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeObjectExact is DecodeObject, but an integer of more than 15 digits, which a float64
// may not hold exactly, is a json.Number of its text: for diffing two objects' JSON, where
// an int64 such as a generation must come out as it went in.
func DecodeObjectExact(data []byte) (map[string]any, error) {
	v, ok := decodeFastExact(data, true)
	if ok {
		if m, isMap := v.(map[string]any); isMap || v == nil {
			return m, nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("invalid JSON: more after the object")
	}
	return m, nil
}

func decodeStd(data []byte) (any, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}

type kv struct {
	k string
	v any
}

// decoder is one decode's state; its scratch stacks (the members of the objects and the
// elements of the arrays being read) are reused from one decode to the next.
type decoder struct {
	data  []byte
	pos   int
	depth int
	kvs   []kv
	vals  []any
	buf   []byte // an unquoted string that is longer than its JSON
	// text is a copy of data that the decoded strings are made from, without a copy each: a
	// string with escapes is unquoted over its own JSON in it. Nothing changes a byte of it
	// once a string is made of that byte.
	text []byte
	// exact keeps an integer of more than 15 digits as a json.Number.
	exact bool
}

var decoders = sync.Pool{New: func() any { return &decoder{} }}

// decodeFast reads data; ok is false if it is not JSON as encoding/json reads it, or it cannot
// tell.
func decodeFast(data []byte) (v any, ok bool) { return decodeFastExact(data, false) }

func decodeFastExact(data []byte, exact bool) (v any, ok bool) {
	d := decoders.Get().(*decoder)
	d.data, d.pos, d.depth, d.exact = data, 0, 0, exact
	d.text = nil
	v, ok = d.value()
	if ok {
		d.space()
		ok = d.pos == len(d.data)
	}
	if !ok { // each object and array cleared its part of the stacks as it ended; not these
		clear(d.kvs)
		clear(d.vals)
	}
	d.kvs, d.vals, d.data, d.text = d.kvs[:0], d.vals[:0], nil, nil
	decoders.Put(d)
	if !ok {
		return nil, false
	}
	return v, true
}

func (d *decoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value() (any, bool) {
	d.space()
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; c {
	case '{':
		return d.object()
	case '[':
		return d.array()
	case '"':
		s, ok := d.str()
		return s, ok
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return d.number()
		}
		return nil, false
	}
}

func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return false
	}
	d.pos += len(lit)
	return true
}

func (d *decoder) object() (any, bool) {
	if d.depth++; d.depth > maxDepth {
		return nil, false
	}
	d.pos++ // {
	base := len(d.kvs)
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return map[string]any{}, true
	}
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.kvs = append(d.kvs, kv{k, v})
		d.space()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			continue
		case '}':
			d.pos++
		default:
			return nil, false
		}
		break
	}
	members := d.kvs[base:]
	m := make(map[string]any, len(members))
	for _, e := range members { // in order: a repeated key's last value wins, as in encoding/json
		m[e.k] = e.v
	}
	clear(members)
	d.kvs = d.kvs[:base]
	d.depth--
	return m, true
}

func (d *decoder) array() (any, bool) {
	if d.depth++; d.depth > maxDepth {
		return nil, false
	}
	d.pos++ // [
	base := len(d.vals)
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return []any{}, true
	}
	for {
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.vals = append(d.vals, v)
		d.space()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			continue
		case ']':
			d.pos++
		default:
			return nil, false
		}
		break
	}
	elems := d.vals[base:]
	s := make([]any, len(elems))
	copy(s, elems)
	clear(elems)
	d.vals = d.vals[:base]
	d.depth--
	return s, true
}

// number reads a number as encoding/json does: its grammar, then strconv.ParseFloat; one out of
// float64's range is left to encoding/json's error.
func (d *decoder) number() (any, bool) {
	start := d.pos
	i, integer, digits, n, ok := d.numberEnd()
	if !ok {
		return nil, false
	}
	d.pos = i
	if integer && digits <= 15 { // exact in a float64: what ParseFloat gives
		f := float64(n)
		if d.data[start] == '-' {
			f = -f
		}
		return f, true
	}
	if integer && d.exact {
		return json.Number(d.data[start:i]), true
	}
	f, err := strconv.ParseFloat(string(d.data[start:i]), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// numberEnd reads the number at d.pos by JSON's grammar, without moving: where it ends, whether
// it is an integer (no fraction or exponent), its count of digits, and, for an integer of up to
// 19 digits, their value without the sign.
func (d *decoder) numberEnd() (end int, integer bool, digits int, n uint64, ok bool) {
	data, start := d.data, d.pos
	i := start
	neg := data[i] == '-'
	if neg {
		i++
	}
	if i >= len(data) {
		return 0, false, 0, 0, false
	}
	switch c := data[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		for ; i < len(data) && data[i] >= '0' && data[i] <= '9'; i++ {
			n = n*10 + uint64(data[i]-'0') // overflow only past 19 digits, which are not used
		}
	default:
		return 0, false, 0, 0, false
	}
	integer = true
	if i < len(data) && data[i] == '.' {
		integer = false
		i++
		first := i
		for ; i < len(data) && data[i] >= '0' && data[i] <= '9'; i++ {
		}
		if i == first {
			return 0, false, 0, 0, false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		integer = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		first := i
		for ; i < len(data) && data[i] >= '0' && data[i] <= '9'; i++ {
		}
		if i == first {
			return 0, false, 0, 0, false
		}
	}
	digits = i - start
	if neg {
		digits--
	}
	return i, integer, digits, n, true
}

// str reads a string at d.pos (its opening quote) as encoding/json unquotes it: escapes, a
// surrogate pair as one rune, and each byte of invalid UTF-8 and lone surrogate as U+FFFD.
func (d *decoder) str() (string, bool) {
	data := d.data
	start := d.pos + 1
	i := start
	plain := true // ASCII without escapes: the bytes are the string
	for {
		if i >= len(data) {
			return "", false
		}
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			if i == start {
				return "", true
			}
			if plain {
				return d.string(start, i), true
			}
			return d.unquote(start, i)
		case c == '\\':
			plain = false
			i += 2 // the escaped byte cannot end the string; unquote checks the escape
		case c < ' ':
			return "", false
		case c >= utf8.RuneSelf:
			plain = false
			i++
		default:
			i++
		}
	}
}

// string is data[start:end] as a string, made from d.text.
func (d *decoder) string(start, end int) string {
	if d.text == nil {
		d.text = bytes.Clone(d.data)
	}
	return unsafe.String(&d.text[start], end-start)
}

// unquote decodes the inside of a string with escapes or non-ASCII bytes, data[start:end].
func (d *decoder) unquote(start, end int) (string, bool) {
	s := d.data[start:end]
	valid := utf8.Valid(s)
	if valid && !hasEscape(s) {
		return d.string(start, end), true
	}
	// Unquoted, it is no longer than its JSON unless a byte of invalid UTF-8 (1) becomes U+FFFD
	// (3): then it is made on its own.
	b := d.buf[:0]
	if valid {
		if d.text == nil {
			d.text = bytes.Clone(d.data)
		}
		b = d.text[start:start:end]
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			switch e := s[i+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
				i += 2
			case 'b':
				b = append(b, '\b')
				i += 2
			case 'f':
				b = append(b, '\f')
				i += 2
			case 'n':
				b = append(b, '\n')
				i += 2
			case 'r':
				b = append(b, '\r')
				i += 2
			case 't':
				b = append(b, '\t')
				i += 2
			case 'u':
				r := hex4(s[i+2:])
				if r < 0 {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2 = hex4(s[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						b = utf8.AppendRune(b, dec)
						i += 6
						break
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	if valid {
		return unsafe.String(&d.text[start], len(b)), true
	}
	d.buf = b
	return string(b), true
}

func hasEscape(s []byte) bool {
	for _, c := range s {
		if c == '\\' {
			return true
		}
	}
	return false
}

// hex4 reads the 4 hex digits of a \u escape; -1 if they are not.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
