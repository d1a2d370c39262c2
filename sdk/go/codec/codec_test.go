package codec_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
)

// sample is what a generated type's methods look like, written out.
type sample struct {
	Name   string
	Count  int32
	Big    int64
	Ratio  float64
	Ptr    *int32
	Tags   []string
	Labels map[string]string
	Data   []byte
}

func (x *sample) DecodeJSON(d *codec.Decoder) {
	if !d.Object() {
		return
	}
	for i := 0; ; i++ {
		k, ok := d.Member(i)
		if !ok {
			return
		}
		switch k {
		case "name":
			codec.ReadString(&x.Name, d)
		case "count":
			codec.ReadInt32(&x.Count, d)
		case "big":
			codec.ReadInt64(&x.Big, d)
		case "ratio":
			codec.ReadFloat64(&x.Ratio, d)
		case "ptr":
			codec.ReadPtr(&x.Ptr, d, codec.ReadInt32[int32])
		case "tags":
			codec.ReadSlice(&x.Tags, d, codec.ReadString[string])
		case "labels":
			codec.ReadStringMap(&x.Labels, d)
		case "data":
			codec.ReadBytes(&x.Data, d)
		default:
			d.Skip()
		}
	}
}

type stdSample struct {
	Name   string            `json:"name"`
	Count  int32             `json:"count"`
	Big    int64             `json:"big"`
	Ratio  float64           `json:"ratio"`
	Ptr    *int32            `json:"ptr"`
	Tags   []string          `json:"tags"`
	Labels map[string]string `json:"labels"`
	Data   []byte            `json:"data"`
}

func TestDecodeAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range append([]string{
		`{}`, `null`, `{"name":"a\u00e9\ud83d\ude00\"","count":-2147483648,"big":9223372036854775807}`,
		`{"count":2147483648}`, `{"count":1.0}`, `{"count":1e2}`, `{"count":"1"}`, `{"big":-9223372036854775809}`,
		`{"ratio":1e308}`, `{"ratio":1e309}`, `{"ratio":-0.5e-3}`, `{"ptr":null}`, `{"ptr":7}`,
		`{"tags":[]}`, `{"tags":null}`, `{"tags":["a",null,"b"]}`, `{"labels":{"a":"1","a":"2","b":null}}`,
		`{"data":"aGVsbG8="}`, `{"data":"!!"}`, `{"name":"x",}`, `{"name" "x"}`, `{"name":"x"} x`,
		`{"unknown":{"deep":[1,2,{"x":null}]},"name":"y"}`, `{"unknown":[1,]}`, `[1]`, `"s"`,
		`{"name":"\x01"}`, `{"name":"bad \xff utf8"}`, `{"count":01}`, `{"count":-}`, `{"name":true}`,
		`{"labels":{"a":1}}`, `{"labels":{"a":"1",}}`, `{"labels":[]}`, `{"labels":null}`,
	}, stringsAcrossWords()...) {
		var std stdSample
		errStd := json.Unmarshal([]byte(in), &std)
		for _, unmarshal := range []func([]byte, codec.Unmarshaler) error{codec.Unmarshal, codec.UnmarshalKeep} {
			var got sample
			errGot := unmarshal([]byte(in), &got)
			if (errStd == nil) != (errGot == nil) {
				t.Errorf("%s: encoding/json says %v, codec %v", in, errStd, errGot)
				continue
			}
			if errStd != nil {
				continue
			}
			want := sample(std)
			a, _ := json.Marshal(stdSample(got))
			b, _ := json.Marshal(stdSample(want))
			if string(a) != string(b) {
				t.Errorf("%s: codec read %s, encoding/json %s", in, a, b)
			}
		}
	}
}

// stringsAcrossWords are names and label keys and values with each byte that ends the decoder's
// plain-ASCII fast path (a quote, escaped or not, a backslash, a control character, non-ASCII
// UTF-8, invalid UTF-8) at every offset of the first three 8-byte words, and strings that end there.
func stringsAcrossWords() []string {
	var out []string
	for _, special := range []string{`\"`, `\\`, `\n`, "\x01", "\x7f", "\u00e9", "é", "\xff", "\x1f", " ", "~"} {
		for at := range 24 {
			s := strings.Repeat("a", at) + special + strings.Repeat("b", 24-at)
			out = append(out, `{"name":"`+s+`","labels":{"`+s+`":"`+s+`"}}`)
		}
	}
	for n := range 26 {
		s := strings.Repeat("c", n)
		out = append(out, `{"name":"`+s+`","labels":{"`+s+`":"`+s+`"}}`, `{"name":"`+s)
	}
	return out
}

// UnmarshalKeep's strings are cut from the data it was given; Unmarshal's from a copy, so that
// the caller may reuse the data.
func TestUnmarshalKeepSharesTheData(t *testing.T) {
	in := []byte(`{"name":"original","labels":{"key":"value"}}`)
	var kept, copied sample
	if err := codec.UnmarshalKeep(in, &kept); err != nil {
		t.Fatal(err)
	}
	if err := codec.Unmarshal(in, &copied); err != nil {
		t.Fatal(err)
	}
	copy(in, bytes.ReplaceAll(in, []byte("original"), []byte("modified")))
	if kept.Name != "modified" || copied.Name != "original" || copied.Labels["key"] != "value" {
		t.Errorf("after the data changed, UnmarshalKeep's name is %q (want it to follow the data), Unmarshal's %q", kept.Name, copied.Name)
	}
}

func TestEncoderWritesAsEncodingJSON(t *testing.T) {
	var e codec.Encoder
	e.BeginObject()
	e.Key(`"s":`)
	e.String("<a&b> \u2028 \xff \"q\"")
	e.Key(`"f":`)
	e.Float(1e21)
	e.Key(`"g":`)
	e.Float(0.000001)
	e.Key(`"b":`)
	e.Bytes64([]byte("hi"))
	e.Key(`"raw":`)
	e.Raw([]byte(" { \"a\" : [ 1 , \"<\" ] } "))
	e.Key(`"arr":`)
	e.BeginArray()
	e.Int(math.MinInt64)
	e.Uint(math.MaxUint64)
	e.Bool(false)
	e.Null()
	e.EndArray()
	e.EndObject()
	got, err := e.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]any{
		"s": "<a&b> \u2028 \xff \"q\"", "f": 1e21, "g": 0.000001, "b": []byte("hi"),
		"raw": json.RawMessage(` { "a" : [ 1 , "<" ] } `), "arr": []any{int64(math.MinInt64), uint64(math.MaxUint64), false, nil},
	})
	// encoding/json sorts a map's keys; put ours in the same order to compare.
	var g, w map[string]json.RawMessage
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	_ = json.Unmarshal(want, &w)
	for k, v := range w {
		if string(g[k]) != string(v) {
			t.Errorf("%s: got %s, want %s", k, g[k], v)
		}
	}
	e.Reset()
	e.Float(math.NaN())
	if _, err := e.Bytes(); err == nil {
		t.Error("NaN encoded without an error")
	}
	_ = strconv.Itoa
}
