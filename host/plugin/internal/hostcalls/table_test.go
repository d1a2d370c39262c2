package hostcalls

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
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controlplane"
	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/object"
	"github.com/wasmrec/wasmrec/host/plugin/internal/informers"
	"github.com/wasmrec/wasmrec/host/plugin/internal/policy"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// The call table (sdk/go/fake/testdata/calls, whose README says the format) run against the
// host: the guest's calls served by Calls under the plugin's policy, reading from the host's
// informers and writing through a real API server. sdk/go/fake runs the same table (its
// table_test.go): what a plugin's test sees there is what the host answers. The table lives
// beside the fake so that it ships with the SDK module and go test's cache sees it change from
// both modules.

const tableDir = "../../../../sdk/go/fake/testdata/calls"

// Names of the namespaces the table's objects live in; the runner makes them. A Namespace in a
// case's objects is one of them.
var tableNamespaces = []string{"demo", "other"}

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
	NotManagers []string       `json:"notManagers"` // only the host's run checks them
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

// tableHost is a control plane with what the table needs, and the host's pieces the calls go
// through.
type tableHost struct {
	cfg     *rest.Config
	dyn     dynamic.Interface
	cache   *cache.Cache
	objects *object.Client
	events  chan *corev1.Event
	record  record.EventRecorder
}

func startTableHost(t *testing.T) *tableHost {
	t.Helper()
	if _, err := controlplane.FindBinDir(""); err != nil {
		testenv.Missing(t, fmt.Errorf("the call table runs against a local API server: %w", err), "controlplane")
	}
	ctrllog.SetLogger(logr.Discard())
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	ctx := context.Background()
	if err := demo.InstallCRD(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range tableNamespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cache.New(cfg, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(cctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	objs, err := object.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The host's recorder, watched rather than sent to the API server: the runner sees each
	// Event as the host makes it, in order.
	h := &tableHost{cfg: cfg, dyn: dynamic.NewForConfigOrDie(cfg), cache: c, objects: objs, events: make(chan *corev1.Event, 1000)}
	b := record.NewBroadcaster()
	w := b.StartEventWatcher(func(e *corev1.Event) { h.events <- e })
	t.Cleanup(func() {
		w.Stop()
		b.Shutdown()
	})
	h.record = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "wasmrec/table"})
	return h
}

func TestCallTable(t *testing.T) {
	tables := readTable(t)
	h := startTableHost(t)
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
			t.Run(file+"/"+tc.Name, func(t *testing.T) { h.run(t, tab, tc) })
		}
	}
	t.Logf("%d cases", n)
	t.Run("protobuf reads", h.protobufReads)
}

// TestTheFakeJudgesTheCallTableAsTheHostDoes holds the two runners together: what follows their
// "From here on" comment, the making of requests and the judging of answers, is the same text.
func TestTheFakeJudgesTheCallTableAsTheHostDoes(t *testing.T) {
	shared := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(string(b), "\n// From here on, the same in ")
		if !ok {
			t.Fatalf("%s has no shared part", path)
		}
		_, after, _ = strings.Cut(after, "\n\n") // past the comment, which names the other file
		return after
	}
	host, fake := shared("table_test.go"), shared(filepath.Join(tableDir, "..", "..", "table_test.go"))
	if host != fake {
		hl, fl := strings.Split(host, "\n"), strings.Split(fake, "\n")
		for i := range min(len(hl), len(fl)) {
			if hl[i] != fl[i] {
				t.Fatalf("the shared part of sdk/go/fake/table_test.go differs from this file's at its line %d:\n%s\n%s", i+1, fl[i], hl[i])
			}
		}
		t.Fatalf("the shared part of sdk/go/fake/table_test.go has %d lines, this file's %d", len(fl), len(hl))
	}
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

func (h *tableHost) resource(k tableKey) (dynamic.ResourceInterface, bool) {
	gv, err := schema.ParseGroupVersion(k.apiVersion)
	if err != nil {
		return nil, false
	}
	m, err := h.cache.RESTMapper().RESTMapping(gv.WithKind(k.kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, false
	}
	if k.namespace != "" { // for a cluster-scoped kind, a path that names nothing, as for the guest
		return h.dyn.Resource(m.Resource).Namespace(k.namespace), true
	}
	return h.dyn.Resource(m.Resource), true
}

// stored is the object k names as the API server has it, as decoded JSON; nil if none.
func (h *tableHost) stored(ctx context.Context, k tableKey) map[string]any {
	r, ok := h.resource(k)
	if !ok || k.name == "" {
		return nil
	}
	u, err := r.Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return plain(u.Object)
}

func (h *tableHost) run(t *testing.T, tab callTable, tc tableCase) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pl := tab.Plugin
	if tc.Plugin != nil {
		pl = *tc.Plugin
	}
	req := tab.Request
	if tc.Request != nil {
		req = *tc.Request
	}
	grant := pl.Grant
	if grant == nil {
		grant = pl.Permissions
	}
	name := pl.Name
	// What the host checks of a plugin's permissions when it loads it.
	pol, err := policy.New(name, grant, pl.Permissions, pl.Namespaces, false)
	if err == nil {
		_, err = pol.CheckWatches(&pl.Manifest, h.cache.RESTMapper())
	}
	switch {
	case tc.Refused != "":
		if err == nil || !strings.Contains(err.Error(), tc.Refused) {
			t.Fatalf("the host loaded the plugin (%v); want it refused, saying %q", err, tc.Refused)
		}
		return
	case err != nil:
		t.Fatalf("the host refuses the plugin: %v", err)
	}

	touched := map[tableKey]bool{}
	defer h.cleanup(t, touched)
	for _, o := range tc.Objects {
		k := keyOf(o)
		touched[k] = true
		h.put(t, ctx, k, o)
	}
	initial := map[tableKey]map[string]any{}
	for k := range touched {
		initial[k] = h.stored(ctx, k)
	}

	gv, _ := schema.ParseGroupVersion(pl.For.APIVersion)
	infs := informers.New(h.cache, nil)
	defer infs.Close()
	reader := NewReader(infs, h.cache.RESTMapper(), pl.Namespaces, nil)
	api := (&API{Name: name, For: gv.WithKind(pl.For.Kind), Mapper: h.cache.RESTMapper(), Objects: h.objects, Recorder: h.record, Reader: reader,
		Reads: NewLimit("reads", 1000, 1000, nil, nil), Writes: NewLimit("writes", 1000, 1000, nil, nil), Log: logr.Discard()}).Init()
	if m, ok := h.cache.RESTMapper().(*cache.Mapper); ok {
		api.KnownKind = m.Known
	}
	calls := &Calls{API: api, Policy: pol, Req: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: req.Namespace, Name: req.Name}}}

	for i, call := range tc.Calls {
		body, k := substitute(t, call, func(k tableKey) map[string]any { return h.stored(ctx, k) }, initial)
		if k.name != "" {
			touched[k] = true
		}
		h.await(t, ctx, reader, touched) // reads come from informers: let them see every write so far
		before := h.stored(ctx, k)
		status, resp := calls.Call(ctx, call.Call, body)
		if o := objectIn(status, resp); o != nil && call.Call != abi.ImportGet {
			touched[keyOf(o)] = true
		}
		for _, e := range check(call, status, resp, before) {
			t.Errorf("call %d (%s %s): %s", i, call.Call, body, e)
		}
	}
	for _, want := range tc.After {
		k := tableKey{want.APIVersion, want.Kind, want.Namespace, want.Name}
		got := h.stored(ctx, k)
		for _, e := range checkAfter(want, got, initial[k]) {
			t.Errorf("after: %s", e)
		}
		// Field managers, which only the API server keeps.
		var managers []string
		md, _ := got["metadata"].(map[string]any)
		mf, _ := md["managedFields"].([]any)
		for _, e := range mf {
			m, _ := e.(map[string]any)
			managers = append(managers, str(m, "manager"))
		}
		for _, m := range want.Managers {
			if !slices.Contains(managers, m) {
				t.Errorf("after: %s %s/%s has field managers %q, none of them %q", want.Kind, want.Namespace, want.Name, managers, m)
			}
		}
		for _, m := range want.NotManagers {
			if slices.Contains(managers, m) {
				t.Errorf("after: %s %s/%s has field managers %q, %q among them", want.Kind, want.Namespace, want.Name, managers, m)
			}
		}
	}
	for _, e := range checkEvents(tc.Events, h.recorded(t, t.Name()), func(o abi.ObjectRef) string {
		return str(h.stored(ctx, tableKey{o.APIVersion, o.Kind, o.Namespace, o.Name}), "metadata", "uid")
	}) {
		t.Errorf("events: %s", e)
	}
}

// put creates o as a test or another controller would, with its status if it has one.
func (h *tableHost) put(t *testing.T, ctx context.Context, k tableKey, o map[string]any) {
	t.Helper()
	r, ok := h.resource(k)
	if !ok {
		t.Fatalf("no resource serves %s %s", k.apiVersion, k.kind)
	}
	if k.kind == "Namespace" && slices.Contains(tableNamespaces, k.name) {
		return // made once, for every case
	}
	u := &unstructured.Unstructured{Object: plain(o)}
	made, err := r.Create(ctx, u, metav1.CreateOptions{FieldManager: "setup"})
	if err != nil {
		t.Fatalf("creating %v: %v", k, err)
	}
	if status, ok := o["status"]; ok && !reflect.DeepEqual(made.Object["status"], plain(status)) {
		made.Object["status"] = plain(status)
		if _, err := r.UpdateStatus(ctx, made, metav1.UpdateOptions{FieldManager: "setup"}); err != nil {
			t.Fatalf("setting the status of %v: %v", k, err)
		}
	}
}

// await waits until the reader's informers hold every object touched as the API server has it.
func (h *tableHost) await(t *testing.T, ctx context.Context, r *Reader, touched map[tableKey]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for k := range touched {
		gv, err := schema.ParseGroupVersion(k.apiVersion)
		if err != nil || k.name == "" {
			continue
		}
		if _, ok := h.resource(k); !ok {
			continue
		}
		for {
			want := str(h.stored(ctx, k), "metadata", "resourceVersion")
			got := ""
			if o, err := r.Get(ctx, gv.WithKind(k.kind), k.namespace, k.name); err == nil {
				got = o.(*object.Object).ResourceVersion
			}
			if got == want {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the host's informer of %v does not reach resourceVersion %q (it has %q)", k, want, got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// recorded returns the Events the host recorded in the case named: those before a sentinel
// recorded now, which the recorder delivers after them.
func (h *tableHost) recorded(t *testing.T, name string) []gotEvent {
	t.Helper()
	sentinel := &unstructured.Unstructured{}
	sentinel.SetAPIVersion("v1")
	sentinel.SetKind("ConfigMap")
	sentinel.SetNamespace("demo")
	sentinel.SetName("sentinel")
	h.record.Event(sentinel, corev1.EventTypeNormal, "TableSentinel", name)
	var out []gotEvent
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-h.events:
			if e.Reason == "TableSentinel" {
				if e.Message != name {
					continue // an earlier case's
				}
				return out
			}
			io := e.InvolvedObject
			out = append(out, gotEvent{tableEvent{Object: abi.ObjectRef{APIVersion: io.APIVersion, Kind: io.Kind, Namespace: io.Namespace, Name: io.Name},
				Namespace: e.Namespace, Type: e.Type, Reason: e.Reason, Message: e.Message, UID: io.UID != ""}, string(io.UID)})
		case <-timeout:
			t.Fatal("the host's recorder did not deliver a sentinel event in 30 s")
		}
	}
}

// cleanup deletes what the case made, finalizers and all, so that the next case starts on
// empty namespaces.
func (h *tableHost) cleanup(t *testing.T, touched map[tableKey]bool) {
	ctx := context.Background()
	for k := range touched {
		if k.kind == "Namespace" || k.name == "" {
			continue
		}
		r, ok := h.resource(k)
		if !ok {
			continue
		}
		_, err := r.Patch(ctx, k.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err == nil || !apierrors.IsNotFound(err) {
			err = r.Delete(ctx, k.name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleaning up %v: %v", k, err)
		}
	}
}

// From here on, the same in sdk/go/fake's table_test.go: how a call's request is made and its
// outcome judged.

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
