package recording

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// appendJSON appends s's JSON to dst: exactly what encoding/json writes for it, without its
// reflection, which was half of the writer's time per recording (the steps are its bulk).
func (s *Step) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"kind":`...)
	dst = appendString(dst, s.Kind)
	if r := s.Request; r != nil {
		dst = append(dst, `,"request":{`...)
		if r.Namespace != "" {
			dst = append(dst, `"namespace":`...)
			dst = appendString(dst, r.Namespace)
			dst = append(dst, ',')
		}
		dst = append(dst, `"name":`...)
		dst = appendString(dst, r.Name)
		if r.Retries != 0 {
			dst = append(dst, `,"retries":`...)
			dst = strconv.AppendUint(dst, uint64(r.Retries), 10)
		}
		dst = append(dst, '}')
	}
	if m := s.Map; m != nil {
		dst = append(dst, `,"map":{"watch":`...)
		dst = strconv.AppendUint(dst, uint64(m.Watch), 10)
		dst = append(dst, `,"object":`...)
		if m.Object == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendBytes(dst, m.Object)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"events":`...)
	if s.Events == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range s.Events {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = s.Events[i].appendJSON(dst)
		}
		dst = append(dst, ']')
	}
	if len(s.Result) > 0 {
		dst = append(dst, `,"result":`...)
		dst = appendBytes(dst, s.Result)
	}
	dst = append(dst, `,"outcome":`...)
	dst = appendString(dst, s.Outcome)
	if s.Error != "" {
		dst = append(dst, `,"error":`...)
		dst = appendString(dst, s.Error)
	}
	return append(dst, '}')
}

func (e *Event) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, e.Type)
	if e.Fn != "" {
		dst = append(dst, `,"fn":`...)
		dst = appendString(dst, e.Fn)
	}
	if len(e.In) > 0 {
		dst = append(dst, `,"in":`...)
		dst = appendBytes(dst, e.In)
	}
	if len(e.Out) > 0 {
		dst = append(dst, `,"out":`...)
		dst = appendBytes(dst, e.Out)
	}
	if e.Status != 0 {
		dst = append(dst, `,"status":`...)
		dst = strconv.AppendUint(dst, uint64(e.Status), 10)
	}
	if e.N != 0 {
		dst = append(dst, `,"n":`...)
		dst = strconv.AppendInt(dst, e.N, 10)
	}
	return append(dst, '}')
}

// appendBytes appends b as encoding/json writes a []byte: a base64 string.
func appendBytes(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendString appends s as encoding/json writes it: as it is when it holds only printable
// ASCII that needs no escape (names, kinds, outcomes), else through encoding/json.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
