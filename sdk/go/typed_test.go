package wasmrec_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

// TypeMeta and Config stand in for k8s.io/api's types, which the SDK does not import: Config
// has the generated protobuf methods, its message one string field (1), data.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

type Config struct {
	TypeMeta `json:",inline"`
	Data     string `json:"data"`
}

func (c *Config) MarshalToSizedBuffer([]byte) (int, error) { return 0, errors.New("not used") }

func (c *Config) Unmarshal(b []byte) error {
	if len(b) < 2 || b[0] != 1<<3|2 || int(b[1]) != len(b)-2 {
		return errors.New("not a config message")
	}
	c.Data = string(b[2:])
	return nil
}

// ConfigList is Config's List: items, field 1.
type ConfigList struct {
	TypeMeta `json:",inline"`
	Items    []Config `json:"items"`
}

func (l *ConfigList) MarshalToSizedBuffer([]byte) (int, error) { return 0, errors.New("not used") }

func (l *ConfigList) Unmarshal(b []byte) error {
	for len(b) > 0 {
		if len(b) < 2 || b[0] != 1<<3|2 || int(b[1]) > len(b)-2 {
			return errors.New("not a ConfigList message")
		}
		var c Config
		if err := c.Unmarshal(b[2 : 2+b[1]]); err != nil {
			return err
		}
		l.Items = append(l.Items, c)
		b = b[2+b[1]:]
	}
	return nil
}

// jsonConfig is Config without the protobuf methods.
type jsonConfig struct {
	TypeMeta `json:",inline"`
	Data     string `json:"data"`
}

// field is a length-delimited protobuf field (lengths under 128).
func field(n byte, v string) string { return string([]byte{n<<3 | 2, byte(len(v))}) + v }

// envelope is the Kubernetes protobuf envelope of raw, with this TypeMeta.
func envelope(apiVersion, kind, raw string) []byte {
	return []byte(abi.ProtobufMagic + field(1, field(1, apiVersion)+field(2, kind)) + field(2, raw) + field(3, "") + field(4, ""))
}

// canned answers every call with one status and response, and keeps the last request.
type canned struct {
	resp []byte
	fn   string
	req  map[string]any
	body string
}

func (c *canned) Call(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
	c.fn, c.req, c.body = fn, nil, string(req)
	if err := json.Unmarshal(req, &c.req); err != nil {
		panic(err)
	}
	return abi.StatusOK, c.resp
}

func (c *canned) Log(int32, []byte) {}

func TestGetIntoAsksForProtobufForATypeWithItsMethodsAndDecodesIt(t *testing.T) {
	tr := &canned{resp: envelope("v1", "Config", field(1, "hi"))}
	var c Config
	if err := wasmrec.NewClientWith(tr).GetInto(context.Background(), "v1", "Config", "demo", "web", &c); err != nil {
		t.Fatal(err)
	}
	if tr.req["encoding"] != abi.EncodingProtobuf || tr.req["name"] != "web" {
		t.Errorf("request %v; want encoding protobuf for web", tr.req)
	}
	if want := (Config{TypeMeta{"v1", "Config"}, "hi"}); c != want {
		t.Errorf("decoded %+v; want %+v", c, want)
	}

	// The same type, answered JSON (a CRD's kind, a host that predates protobuf, the fake).
	tr.resp = []byte(`{"apiVersion":"v1","kind":"Config","data":"json"}`)
	c = Config{}
	if err := wasmrec.NewClientWith(tr).GetInto(context.Background(), "v1", "Config", "demo", "web", &c); err != nil {
		t.Fatal(err)
	}
	if want := (Config{TypeMeta{"v1", "Config"}, "json"}); c != want {
		t.Errorf("decoded %+v from JSON; want %+v", c, want)
	}

	// A type with the methods, of another kind, asks for JSON: its message is not the kind's.
	tr.resp = []byte(`{"apiVersion":"v1","kind":"Other","data":"other"}`)
	c = Config{}
	if err := wasmrec.NewClientWith(tr).GetInto(context.Background(), "v1", "Other", "demo", "web", &c); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.req["encoding"]; ok || c.Data != "other" {
		t.Errorf("request %v, decoded %+v; want no encoding asked for kind Other into a Config", tr.req, c)
	}

	// A type without the methods asks for JSON.
	tr.resp = []byte(`{"apiVersion":"v1","kind":"Config","data":"json"}`)
	var j jsonConfig
	if err := wasmrec.NewClientWith(tr).GetInto(context.Background(), "v1", "Config", "demo", "web", &j); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.req["encoding"]; ok || j.Data != "json" {
		t.Errorf("request %v, decoded %+v; want no encoding asked and the JSON decoded", tr.req, j)
	}
}

func TestListIntoDecodesProtobufAsItWouldJSON(t *testing.T) {
	tr := &canned{resp: envelope("v1", "ConfigList", field(1, field(1, "a"))+field(1, field(1, "b")))}
	var fromProto ConfigList
	if err := wasmrec.NewClientWith(tr).ListInto(context.Background(), "v1", "Config", "demo", "app=web", &fromProto); err != nil {
		t.Fatal(err)
	}
	if tr.fn != abi.ImportList || tr.req["encoding"] != abi.EncodingProtobuf || tr.req["labelSelector"] != "app=web" {
		t.Errorf("%s %v; want a list asking for protobuf", tr.fn, tr.req)
	}
	tr.resp = []byte(`{"items":[{"apiVersion":"v1","kind":"Config","data":"a"},{"apiVersion":"v1","kind":"Config","data":"b"}]}`)
	var fromJSON ConfigList
	if err := wasmrec.NewClientWith(tr).ListInto(context.Background(), "v1", "Config", "demo", "app=web", &fromJSON); err != nil {
		t.Fatal(err)
	}
	// Into the same values again: what they held is dropped, whichever the encoding.
	tr.resp = envelope("v1", "ConfigList", field(1, field(1, "a"))+field(1, field(1, "b")))
	if err := wasmrec.NewClientWith(tr).ListInto(context.Background(), "v1", "Config", "demo", "app=web", &fromProto); err != nil {
		t.Fatal(err)
	}
	tr.resp = []byte(`{"items":[{"apiVersion":"v1","kind":"Config","data":"a"},{"apiVersion":"v1","kind":"Config","data":"b"}]}`)
	if err := wasmrec.NewClientWith(tr).ListInto(context.Background(), "v1", "Config", "demo", "app=web", &fromJSON); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(fromProto)
	b, _ := json.Marshal(fromJSON)
	if string(a) != string(b) || len(fromJSON.Items) != 2 {
		t.Errorf("from protobuf %s, from JSON %s; want the same two items", a, b)
	}
}

func TestAMalformedProtobufAnswerIsAnErrorNamingTheObject(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp string
		want string
	}{
		{"no raw object", abi.ProtobufMagic + field(1, field(1, "v1")), "has no raw object"},
		{"length past the end", abi.ProtobufMagic + "\x12\x05ab", "field 2: length past the end"},
		{"truncated tag", abi.ProtobufMagic + "\x80", "truncated field tag"},
		{"field 0", abi.ProtobufMagic + "\x02\x00", "field number 0"},
		{"wire type 3", abi.ProtobufMagic + "\x0b", "field 1: wire type 3"},
		{"truncated varint", abi.ProtobufMagic + "\x08\xff", "field 1: truncated varint"},
		{"truncated fixed64", abi.ProtobufMagic + "\x09\x01", "field 1: truncated 64-bit"},
		{"truncated fixed32", abi.ProtobufMagic + "\x0d\x01", "field 1: truncated 32-bit"},
		{"overlong varint", abi.ProtobufMagic + "\x12\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "field 2: length past the end"},
		{"bad TypeMeta", abi.ProtobufMagic + "\x0a\x01\x0b" + field(2, field(1, "x")), "TypeMeta: field 1: wire type 3"},
		{"the type refuses it", string(envelope("v1", "Config", "junk")), "not a config message"},
	} {
		var c Config
		err := wasmrec.NewClientWith(&canned{resp: []byte(tc.resp)}).GetInto(context.Background(), "v1", "Config", "demo", "web", &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "get Config demo/web: decoding the response") {
			t.Errorf("%s: %v; want an error naming Config demo/web, saying %q", tc.name, err, tc.want)
		}
	}
}

func TestOtherWireTypesAreSkipped(t *testing.T) {
	resp := abi.ProtobufMagic + "\x28\x96\x01" + "\x31\x01\x02\x03\x04\x05\x06\x07\x08" + "\x3d\x01\x02\x03\x04" + field(2, field(1, "hi"))
	var c Config
	if err := wasmrec.NewClientWith(&canned{resp: []byte(resp)}).GetInto(context.Background(), "v1", "Config", "demo", "web", &c); err != nil || c.Data != "hi" {
		t.Errorf("%+v, %v; want hi", c, err)
	}
}

func TestGetIntoATypeWithProtobufMethodsFromTheFake(t *testing.T) {
	m := wasmrec.Manifest{Name: "p", For: wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Permissions: []wasmrec.Permission{{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
	cm := wasmrec.NewObject("v1", "ConfigMap", "demo", "web")
	cm.SetNested("hi", "data")
	c := fake.NewCluster(m, cm).Client()
	var got Config
	if err := c.GetInto(context.Background(), "v1", "ConfigMap", "demo", "web", &got); err != nil {
		t.Fatal(err)
	}
	if got.Data != "hi" || got.Kind != "ConfigMap" {
		t.Errorf("%+v; want the fake's JSON decoded", got)
	}
	var list ConfigList
	if err := c.ListInto(context.Background(), "v1", "ConfigMap", "demo", "", &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Data != "hi" {
		t.Errorf("%+v; want the one ConfigMap", list)
	}
}
