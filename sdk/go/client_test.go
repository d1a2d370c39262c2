package wasmrec_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// List and Get read their answers as encoding/json reads them into a map (List's items into a
// struct's Items field), errors included.
func TestListAndGetReadTheirAnswersAsEncodingJSON(t *testing.T) {
	for _, resp := range []string{
		`{"items":[]}`, `{"items":[{"a":1,"b":[true,null,"x"]},{"metadata":{"name":"n"}}]}`, `{"items":[null]}`, `{}`, `{"items":null}`,
		`{"Items":[{"a":1}]}`, `{"items":[{"a":1}],"ITEMS":[{"b":2}]}`, `{"items":[1]}`, `{"items":{}}`, `{"items":[{"a":1}]`, `[]`, `null`,
		`{"items":[{"a":1e400}]}`, `{"other":1,"items":[{"\u00e9":"\ud83d\ude00"}]}`,
	} {
		var want struct {
			Items []map[string]any `json:"items"`
		}
		wantErr := json.Unmarshal([]byte(resp), &want)
		got, err := wasmrec.NewClientWith(&canned{resp: []byte(resp)}).List(context.Background(), "v1", "ConfigMap", "", "")
		if wantErr != nil {
			if err == nil || err.Error() != "list: decoding the response: "+wantErr.Error() {
				t.Errorf("list answered %s: %v; want encoding/json's error %v", resp, err, wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(want.Items) {
			t.Errorf("list answered %s: %d objects, %v; want %d", resp, len(got), err, len(want.Items))
			continue
		}
		for i := range got {
			if !reflect.DeepEqual(got[i].Object, want.Items[i]) {
				t.Errorf("list answered %s: item %d is %#v; want %#v", resp, i, got[i].Object, want.Items[i])
			}
		}
	}
	for _, resp := range []string{`{"a":{"b":[1,"x",null]}}`, `null`, `[]`, `{`, `{"a":1e400}`} {
		var want map[string]any
		wantErr := json.Unmarshal([]byte(resp), &want)
		got, err := wasmrec.NewClientWith(&canned{resp: []byte(resp)}).Get(context.Background(), "v1", "ConfigMap", "demo", "x")
		switch {
		case wantErr != nil:
			if err == nil || err.Error() != "get: decoding the response: "+wantErr.Error() {
				t.Errorf("get answered %s: %v; want encoding/json's error %v", resp, err, wantErr)
			}
		case err != nil || !reflect.DeepEqual(got.Object, want):
			t.Errorf("get answered %s: %#v, %v; want %#v", resp, got, err, want)
		}
	}
}

func TestFromTypedDecodesTheJSONAsEncodingJSON(t *testing.T) {
	v := struct {
		A string         `json:"a"`
		B []int          `json:"b"`
		C map[string]any `json:"c"`
		D float64        `json:"d"`
	}{"<é>\u2028", []int{1, 2}, map[string]any{"x": nil, "y": []any{}}, -0.5}
	o, err := wasmrec.FromTyped(v)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	var want map[string]any
	json.Unmarshal(b, &want)
	if !reflect.DeepEqual(o.Object, want) {
		t.Errorf("%#v; want %#v", o.Object, want)
	}
	if _, err := wasmrec.FromTyped(func() {}); err == nil {
		t.Errorf("FromTyped of a func: no error")
	}
}

// The requests of get and list, written by hand, are what json.Marshal writes of them.
func TestReadRequestsAreWhatEncodingJSONWrites(t *testing.T) {
	ctx := context.Background()
	for _, ref := range []abi.ObjectRef{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "demo", Name: "web"},
		{APIVersion: "v1", Kind: "Namespace", Name: "demo"},
		{APIVersion: "x/<v1>", Kind: "K\"\n", Namespace: "\xff\u2028", Name: "é&"},
		{},
	} {
		tr := &canned{resp: []byte(`{}`)}
		c := wasmrec.NewClientWith(tr)
		pref := ref // of the kind of Config, which asks for protobuf
		pref.Kind = "Config"
		for _, tc := range []struct {
			do   func() error
			want any
		}{
			{func() error { _, err := c.Get(ctx, ref.APIVersion, ref.Kind, ref.Namespace, ref.Name); return err }, ref},
			{func() error { return c.GetInto(ctx, pref.APIVersion, pref.Kind, pref.Namespace, pref.Name, &Config{}) }, abi.GetRequest{ObjectRef: pref, Encoding: "protobuf"}},
			{func() error { _, err := c.List(ctx, ref.APIVersion, ref.Kind, ref.Namespace, ref.Name); return err },
				abi.ListRequest{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, LabelSelector: ref.Name}},
			{func() error {
				return c.ListInto(ctx, pref.APIVersion, pref.Kind, pref.Namespace, pref.Name, &ConfigList{})
			},
				abi.ListRequest{APIVersion: pref.APIVersion, Kind: pref.Kind, Namespace: pref.Namespace, LabelSelector: pref.Name, Encoding: "protobuf"}},
		} {
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(tc.want)
			if tr.body != string(want) {
				t.Errorf("%s request %s; want %s", tr.fn, tr.body, want)
			}
		}
	}
}

// transportFunc is a Transport of one function; it logs nothing.
type transportFunc func(ctx context.Context, fn string, req []byte) (abi.Status, []byte)

func (f transportFunc) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	return f(ctx, fn, req)
}
func (transportFunc) Log(int32, []byte) {}

// Write options go out as ABI.md says: beside the object in an envelope for a create, update
// or update_status, beside the other fields for a patch and a delete; no options, no envelope.
func TestWriteOptionsAreSentAsTheABISays(t *testing.T) {
	var got []string
	c := wasmrec.NewClientWith(transportFunc(func(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
		got = append(got, fn+" "+string(req))
		return abi.StatusOK, []byte(`{"metadata":{"name":"x"}}`)
	}))
	ctx := context.Background()
	obj := wasmrec.NewObject("v1", "ConfigMap", "demo", "x")
	_, _ = c.Create(ctx, obj)
	_, _ = c.Create(ctx, obj, wasmrec.DryRun, wasmrec.FieldOwner("spec"))
	_, _ = c.Status().Update(ctx, obj, wasmrec.FieldOwner(`a "b"`))
	_, _ = c.Apply(ctx, obj, true, wasmrec.DryRun)
	_ = c.Delete(ctx, obj.Ref(), wasmrec.DeleteOptions{DryRun: true})
	want := []string{
		`create {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"}}`,
		`create {"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"}},"fieldOwner":"spec","dryRun":true}`,
		`update_status {"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"}},"fieldOwner":"a \"b\""}`,
		`patch {"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"x","type":"apply","patch":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo"}},"force":true,"dryRun":true}`,
		`delete {"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"x","dryRun":true}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
