package codec

import (
	"errors"

	"github.com/wasmrec/wasmrec/sdk/go/internal/jsonv"
)

// compact appends src to dst without the white space between tokens, and with <, >, & and
// U+2028/U+2029 in strings escaped, as encoding/json writes what a MarshalJSON method returns.
// src that is not one JSON value is an error.
func compact(dst, src []byte) ([]byte, error) {
	t := jsonv.NewText(src)
	if !t.Skip() || t.Peek() != 0 {
		return dst, errors.New("json: raw JSON that is not one valid value")
	}
	inString := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !inString {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			case '"':
				inString = true
			}
			dst = append(dst, c)
			continue
		}
		switch {
		case c == '\\':
			dst = append(dst, c, src[i+1])
			i++
		case c == '"':
			inString = false
			dst = append(dst, c)
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8: // U+2028, U+2029
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[src[i+2]&0xF])
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst, nil
}

const hex = "0123456789abcdef"
