package wasmrec_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

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
