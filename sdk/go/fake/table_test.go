package fake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

// The call table (testdata/calls, whose README says the format) run against the fake: the same
// cases the host's table_test.go (host/plugin/internal/hostcalls) runs against the host's calls and
// a real API server, so that what a plugin's test sees here is what the host answers.

const tableDir = "testdata/calls"

type callTable struct {
	Plugin  tablePlugin  `json:"plugin"`
	Request tableRequest `json:"request"`
	Cases   []tableCase  `json:"cases"`
}

type tablePlugin struct {
	abi.Manifest
	Grant      []abi.Permission `json:"grant"` // nil: the manifest's permissions
	Namespaces []string         `json:"namespaces"`
}

type tableRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type tableCase struct {
	Name    string           `json:"name"`
	Plugin  *tablePlugin     `json:"plugin"`
	Request *tableRequest    `json:"request"`
	Objects []map[string]any `json:"objects"`
	Refused string           `json:"refused"`
	Calls   []tableCall      `json:"calls"`
	After   []tableObject    `json:"after"`
	Events  []tableEvent     `json:"events"`
}

type tableCall struct {
	Call     string          `json:"call"`
	Body     json.RawMessage `json:"body"`
	Raw      *string         `json:"raw"`
	Status   string          `json:"status"`
	Message  string          `json:"message"`
	Response any             `json:"response"`
	Items    []string        `json:"items"`
}

type tableObject struct {
	APIVersion  string         `json:"apiVersion"`
	Kind        string         `json:"kind"`
	Namespace   string         `json:"namespace"`
	Name        string         `json:"name"`
	Absent      bool           `json:"absent"`
	Object      map[string]any `json:"object"`
	Managers    []string       `json:"managers"`
	NotManagers []string       `json:"notManagers"` // the fake keeps no field managers: not checked here
}

type tableEvent struct {
	Object    abi.ObjectRef `json:"object"`
	Namespace string        `json:"namespace"`
	Type      string        `json:"type"`
	Reason    string        `json:"reason"`
	Message   string        `json:"message"`
	UID       bool          `json:"uid"`
}

// readTable reads every file of the table, by file name.
func readTable(t *testing.T) map[string]callTable {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(tableDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no call table in %s: %v", tableDir, err)
	}
	out := map[string]callTable{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tab callTable
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&tab); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = tab
	}
	return out
}

func TestCallTable(t *testing.T) {
	tables := readTable(t)
	n := 0
	for _, file := range slices.Sorted(func(yield func(string) bool) {
		for f := range tables {
			if !yield(f) {
				return
			}
		}
	}) {
		tab := tables[file]
		for _, tc := range tab.Cases {
			n++
			t.Run(file+"/"+tc.Name, func(t *testing.T) { run(t, tab, tc) })
		}
	}
	t.Logf("%d cases", n)
}

// tableKey names an object of the table.
type tableKey struct{ apiVersion, kind, namespace, name string }

func keyOf(o map[string]any) tableKey {
	return tableKey{str(o, "apiVersion"), str(o, "kind"), str(o, "metadata", "namespace"), str(o, "metadata", "name")}
}

// named is the object a call's request names: the object written, the one referred to, or an
// event's object.
func named(fn string, body map[string]any) tableKey {
	switch fn {
	case abi.ImportCreate, abi.ImportUpdate, abi.ImportUpdateStatus:
		if o, ok := body["object"].(map[string]any); ok && body["apiVersion"] == nil { // with options
			return keyOf(o)
		}
		return keyOf(body)
	case abi.ImportEvent:
		o, _ := body["object"].(map[string]any)
		return tableKey{str(o, "apiVersion"), str(o, "kind"), str(o, "namespace"), str(o, "name")}
	}
	return tableKey{str(body, "apiVersion"), str(body, "kind"), str(body, "namespace"), str(body, "name")}
}

// stored is the object k names as the cluster has it, as decoded JSON; nil if none.
func stored(c *fake.Cluster, k tableKey) map[string]any {
	o, ok := c.Get(k.apiVersion, k.kind, k.namespace, k.name)
	if !ok {
		return nil
	}
	return plain(o.Object)
}

func run(t *testing.T, tab callTable, tc tableCase) {
	ctx := context.Background()
	pl := tab.Plugin
	if tc.Plugin != nil {
		pl = *tc.Plugin
	}
	req := tab.Request
	if tc.Request != nil {
		req = *tc.Request
	}
	c := fake.NewCluster(pl.Manifest).SetNamespaces(pl.Namespaces...)
	if pl.Grant != nil {
		c.SetGrant(pl.Grant...)
	}
	initial := map[tableKey]map[string]any{}
	for _, o := range tc.Objects {
		c.Put(&wasmrec.Object{Object: plain(o)})
		initial[keyOf(o)] = stored(c, keyOf(o))
	}

	_, err := c.Reconcile(ctx, wasmrec.ReconcilerFunc(func(ctx context.Context, _ wasmrec.Request) (wasmrec.Result, error) {
		for i, call := range tc.Calls {
			body, k := substitute(t, call, func(k tableKey) map[string]any { return stored(c, k) }, initial)
			before := stored(c, k)
			status, resp := c.Call(ctx, call.Call, body)
			for _, e := range check(call, status, resp, before) {
				t.Errorf("call %d (%s %s): %s", i, call.Call, body, e)
			}
		}
		return wasmrec.Result{}, nil
	}), wasmrec.NewRequest(req.Namespace, req.Name))
	switch {
	case tc.Refused != "":
		if err == nil || !strings.Contains(err.Error(), tc.Refused) {
			t.Fatalf("the fake ran the plugin (%v); want it refused, saying %q", err, tc.Refused)
		}
		return
	case err != nil:
		t.Fatal(err)
	}
	for _, want := range tc.After {
		k := tableKey{want.APIVersion, want.Kind, want.Namespace, want.Name}
		for _, e := range checkAfter(want, stored(c, k), initial[k]) {
			t.Errorf("after: %s", e)
		}
	}
	var got []gotEvent
	for _, e := range c.Events() {
		got = append(got, gotEvent{tableEvent{Object: e.Object, Namespace: e.Namespace, Type: e.Type, Reason: e.Reason, Message: e.Message, UID: e.UID != ""}, e.UID})
	}
	for _, e := range checkEvents(tc.Events, got, func(o abi.ObjectRef) string {
		return str(stored(c, tableKey{o.APIVersion, o.Kind, o.Namespace, o.Name}), "metadata", "uid")
	}) {
		t.Errorf("events: %s", e)
	}
}

// From here on, the same in host/plugin/internal/hostcalls's table_test.go: how a call's request is
// made and its outcome judged.

// substitute makes a call's request: the body, with "$rv" and "$uid" replaced by the
// resourceVersion and uid of the object it names as stored now, and "$rv0" by the
// resourceVersion that object had when the case began.
func substitute(t *testing.T, call tableCall, stored func(tableKey) map[string]any, initial map[tableKey]map[string]any) ([]byte, tableKey) {
	t.Helper()
	if call.Raw != nil {
		return []byte(*call.Raw), tableKey{}
	}
	var body map[string]any
	d := json.NewDecoder(bytes.NewReader(call.Body))
	d.UseNumber()
	if err := d.Decode(&body); err != nil {
		t.Fatalf("the table's body %s: %v", call.Body, err)
	}
	k := named(call.Call, body)
	var cur map[string]any
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for f, e := range v {
				v[f] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		case string:
			if cur == nil {
				cur = stored(k)
			}
			switch v {
			case "$rv":
				return str(cur, "metadata", "resourceVersion")
			case "$uid":
				return str(cur, "metadata", "uid")
			case "$rv0":
				return str(initial[k], "metadata", "resourceVersion")
			}
		}
		return v
	}
	walk(body)
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b, k
}

// objectIn is the object a successful call answered with, if it is one.
func objectIn(status abi.Status, resp []byte) map[string]any {
	var o map[string]any
	if status != abi.StatusOK || json.Unmarshal(resp, &o) != nil || str(o, "metadata", "name") == "" {
		return nil
	}
	return o
}

// check judges a call's outcome; before is the object it names as it was before the call.
func check(call tableCall, status abi.Status, resp []byte, before map[string]any) []string {
	want := call.Status
	if want == "" {
		want = abi.StatusOK.String()
	}
	if status.String() != want {
		return []string{fmt.Sprintf("status %s (%s), want %s", status, resp, want)}
	}
	var errs []string
	if call.Message != "" && !strings.Contains(string(resp), call.Message) {
		errs = append(errs, fmt.Sprintf("the answer %q does not say %q", resp, call.Message))
	}
	if status != abi.StatusOK {
		return errs
	}
	var got any
	if len(resp) > 0 {
		if err := json.Unmarshal(resp, &got); err != nil {
			return append(errs, fmt.Sprintf("the answer %q is not JSON: %v", resp, err))
		}
	}
	if call.Response != nil {
		errs = append(errs, match("", call.Response, got, before)...)
	}
	if call.Items != nil {
		items, _ := got.(map[string]any)["items"].([]any)
		names := []string{}
		for _, it := range items {
			o, _ := it.(map[string]any)
			names = append(names, strings.TrimPrefix(str(o, "metadata", "namespace")+"/"+str(o, "metadata", "name"), "/"))
		}
		if !slices.Equal(names, call.Items) {
			errs = append(errs, fmt.Sprintf("items %q, want %q", names, call.Items))
		}
	}
	return errs
}

// checkAfter judges an object after the calls; initial is how it was when the case began.
func checkAfter(want tableObject, got, initial map[string]any) []string {
	name := strings.TrimPrefix(want.Namespace+"/"+want.Name, "/")
	switch {
	case want.Absent && got != nil:
		return []string{fmt.Sprintf("%s %s exists, want it gone: %v", want.Kind, name, got)}
	case want.Absent:
		return nil
	case got == nil:
		return []string{fmt.Sprintf("%s %s does not exist", want.Kind, name)}
	}
	var errs []string
	for _, e := range match("", plain(want.Object), got, initial) {
		errs = append(errs, want.Kind+" "+name+": "+e)
	}
	return errs
}

// gotEvent is an Event recorded, with the uid of its object if it has one.
type gotEvent struct {
	tableEvent
	uid string
}

// checkEvents compares the Events recorded with those wanted, in order; uid returns the uid of
// the object an Event names, as stored now.
func checkEvents(want []tableEvent, got []gotEvent, uid func(abi.ObjectRef) string) []string {
	var errs []string
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(want):
			errs = append(errs, fmt.Sprintf("an event not wanted: %+v", got[i].tableEvent))
		case i >= len(got):
			errs = append(errs, fmt.Sprintf("no event %+v", want[i]))
		case got[i].tableEvent != want[i]:
			errs = append(errs, fmt.Sprintf("event %d: %+v, want %+v", i, got[i].tableEvent, want[i]))
		case want[i].UID && got[i].uid != uid(want[i].Object):
			errs = append(errs, fmt.Sprintf("event %d has uid %q, want its object's, %q", i, got[i].uid, uid(want[i].Object)))
		}
	}
	return errs
}

// match compares a value the table wants with what was got, at path: a map names the fields it
// wants (null: absent) and ignores the others; "$any" is any value; "$same" and "$changed"
// compare with the value at path in before.
func match(path string, want, got, before any) []string {
	at := path
	if at == "" {
		at = "the object"
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s is %v, want an object", at, got)}
		}
		b, _ := before.(map[string]any)
		var errs []string
		for _, f := range slices.Sorted(func(yield func(string) bool) {
			for f := range w {
				if !yield(f) {
					return
				}
			}
		}) {
			gv, has := g[f]
			switch {
			case w[f] == nil && has:
				errs = append(errs, fmt.Sprintf("%s.%s is %v, want it absent", path, f, gv))
			case w[f] == nil:
			case !has:
				errs = append(errs, fmt.Sprintf("%s.%s is absent, want %v", path, f, w[f]))
			default:
				errs = append(errs, match(path+"."+f, w[f], gv, b[f])...)
			}
		}
		return errs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s is %v, want %v", at, got, want)}
		}
		b, _ := before.([]any)
		var errs []string
		for i := range w {
			var bi any
			if i < len(b) {
				bi = b[i]
			}
			errs = append(errs, match(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], bi)...)
		}
		return errs
	case string:
		switch w {
		case "$any":
			return nil
		case "$same":
			if !reflect.DeepEqual(got, before) {
				return []string{fmt.Sprintf("%s is %v, want it unchanged (%v)", at, got, before)}
			}
			return nil
		case "$changed":
			if reflect.DeepEqual(got, before) {
				return []string{fmt.Sprintf("%s is %v, unchanged; want it changed", at, got)}
			}
			return nil
		}
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s is %v, want %v", at, got, want)}
	}
	return nil
}

// plain is v as encoding/json decodes it into an any: float64 numbers, no json.Number.
func plain[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func str(o map[string]any, fields ...string) string {
	var v any = o
	for _, f := range fields {
		m, _ := v.(map[string]any)
		v = m[f]
	}
	s, _ := v.(string)
	return s
}
