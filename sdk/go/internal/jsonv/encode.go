package jsonv

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxEncodeDepth is how deep Marshal nests before it hands the value to encoding/json, which
// tells a cycle (a map that holds itself) from a deep value.
const maxEncodeDepth = 1000

// errStd says a value is left to encoding/json.
var errStd = errors.New("left to encoding/json")

// Marshal encodes v as json.Marshal does, byte for byte: maps with their keys sorted, HTML
// characters escaped, floats as encoding/json writes them. map[string]any, []any, string,
// float64, bool and nil are written here without reflection; any other value is written by
// json.Marshal where it stands, and a value json.Marshal refuses (NaN, a cycle) is refused with
// its error.
func Marshal(v any) ([]byte, error) {
	b, err := appendValue(nil, v, 0)
	if err != nil {
		return json.Marshal(v) // its value, or its error
	}
	return b, nil
}

func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case float64:
		return appendFloat(b, v)
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		if depth++; depth > maxEncodeDepth {
			return nil, errStd
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, v[k], depth); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		if depth++; depth > maxEncodeDepth {
			return nil, errStd
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, depth); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, errStd
	}
	return append(b, enc...), nil
}

// appendFloat writes f as encoding/json does: as ES6 would, without exponent padding.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errStd
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 is e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// AppendString appends s quoted as json.Marshal writes a string.
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// appendString writes s quoted as encoding/json does: <, > and & escaped, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendFloat appends f as json.Marshal writes a float64; ok is false for NaN and the
// infinities, which JSON cannot hold.
func AppendFloat(b []byte, f float64) (_ []byte, ok bool) {
	out, err := appendFloat(b, f)
	if err != nil {
		return b, false
	}
	return out, true
}
