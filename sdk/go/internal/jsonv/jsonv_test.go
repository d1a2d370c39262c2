package jsonv

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// same reports whether a and b are the same decoded JSON, float bits (the sign of zero) included.
func same(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !same(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !same(a[i], b[i]) {
				return false
			}
		}
		return true
	case float64:
		b, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(b)
	case string, bool, nil:
		return a == b
	}
	return false
}

// check decodes data with Decode and with encoding/json and reports how they differ. fast says
// whether Decode read it itself (without handing it to encoding/json).
func check(data []byte) (fast bool, diff string) {
	var want any
	wantErr := json.Unmarshal(data, &want)
	got, gotErr := Decode(data)
	_, fast = decodeFast(data)
	switch {
	case wantErr != nil:
		if gotErr == nil || gotErr.Error() != wantErr.Error() {
			return fast, fmt.Sprintf("error %v; encoding/json's is %v", gotErr, wantErr)
		}
		if got != nil {
			return fast, fmt.Sprintf("%#v with the error; want nil", got)
		}
		if fast {
			return fast, "read without error by the fast path"
		}
	case gotErr != nil:
		return fast, fmt.Sprintf("error %v; encoding/json reads %#v", gotErr, want)
	case !same(got, want):
		return fast, fmt.Sprintf("%#v; encoding/json reads %#v", got, want)
	case !fast:
		return fast, "handed to encoding/json, which reads it"
	}
	var wantMap map[string]any
	wantErr = json.Unmarshal(data, &wantMap)
	gotMap, gotErr := DecodeObject(data)
	switch {
	case (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error():
		return fast, fmt.Sprintf("DecodeObject: error %v; encoding/json's is %v", gotErr, wantErr)
	case wantErr == nil && !same(gotMap, wantMap):
		return fast, fmt.Sprintf("DecodeObject: %#v; encoding/json reads %#v", gotMap, wantMap)
	}
	return fast, ""
}

func TestDecodeAsEncodingJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, in := range []string{
		// Values.
		`{}`, `[]`, `null`, `true`, `false`, `""`, `0`, `-0`, `"x"`, ` {"a" : [1, 2.5, -3e2, true, false, null, "s", {}, []] } `,
		`{"a":1,"a":2}`, `{"":0}`, `[[[]],{}]`, "\t\r\n [ 1 ] \n",
		// Numbers: integers to 15 digits read exactly, longer ones and fractions by ParseFloat.
		`123456789012345`, `1234567890123456`, `12345678901234567890`, `-9007199254740993`, `9007199254740993`,
		`1.5`, `-0.0`, `0e0`, `1E+2`, `1e-2`, `2.2250738585072011e-308`, `1.7976931348623157e308`, `4.9e-324`, `1e-400`,
		`0.1`, `123456789012345678901234567890`, `-1.0e-0`,
		// Strings: escapes, surrogate pairs, invalid UTF-8 and lone surrogates become U+FFFD.
		`"\" \\ \/ \b \f \n \r \t"`, `"\u0041\u00e9\u4e2d"`, `"\uD83D\uDE00"`, `"\ud83d\ude00x"`, `"\uD83D"`, `"\uDE00"`,
		`"\uD83Dx"`, `"\uD83D\u0041"`, `"\uD83D\uD83D\uDE00"`, `"\u0000"`, `"é😀"`, "\"\xff\"", "\"a\xc3\x28b\"", "\"\xed\xa0\x80\"",
		"\"\xf0\x9f\x98\"", "\"\x7f\"", `"\uFFFD"`, "{\"\xff\":1}", `{"\u0041":"\/"}`,
		// Nesting: encoding/json's limit is 10000.
		deep(10000), deep(10001), deepObj(10000), deepObj(10001),
		// Invalid.
		``, ` `, `{`, `}`, `[`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":}`, `{1:2}`, `[1 2]`, `"abc`, `"\`, `"\x"`, `"\'"`,
		`"\u12"`, `"\u12g4"`, `"\uD83D\u12"`, "\"a\nb\"", "\"\x00\"", `01`, `-`, `-a`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `1.5.5`,
		`tru`, `truex`, `nul`, `nulll`, `True`, `NaN`, `Infinity`, `1 2`, `{} {}`, `[1]x`, "\xef\xbb\xbf{}", `1e400`, `-1e400`,
		`[1e400]`, `{"a":1e999}`, "[\"\\\u2028\"]",
	} {
		if _, diff := check([]byte(in)); diff != "" {
			t.Errorf("%.60q: %s", in, diff)
		}
	}
}

func TestDecodeObjectOfOtherValues(t *testing.T) {
	for _, in := range []string{`[]`, `"s"`, `1`, `true`} {
		m, err := DecodeObject([]byte(in))
		if err == nil || !strings.Contains(err.Error(), "cannot unmarshal") || m != nil {
			t.Errorf("%s: %v, %v; want encoding/json's error", in, m, err)
		}
	}
	if m, err := DecodeObject([]byte(`null`)); m != nil || err != nil {
		t.Errorf("null: %v, %v; want a nil map", m, err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"y"}},"data":{"k":"v\n\u00e9"}}`,
		`[1,-2.5e3,true,null,"\uD83D\uDE00",{"":[]}]`, `"\ud800"`, "\"\xff\"", `1e400`, `[[[[]]]]`, `{"a":1,"a":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, diff := check(data); diff != "" {
			t.Errorf("%q: %s", data, diff)
		}
	})
}

// The strings decoded share no memory with the input, nor with another decode's.
func TestDecodedStringsAreTheirOwn(t *testing.T) {
	in := []byte("{\"key\":\"value\",\"esc\":\"a\\nb\\u00e9\",\"bad\":\"\xff\"}")
	first, err := DecodeObject(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = ' '
	}
	if _, err := DecodeObject([]byte(`{"other":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","esc":"c\td"}`)); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"key": "value", "esc": "a\nb\u00e9", "bad": "\ufffd"}
	if !same(first, want) {
		t.Errorf("%#v after the input changed and another decode; want %#v", first, want)
	}
}
