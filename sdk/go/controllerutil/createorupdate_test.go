package controllerutil_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/controllerutil"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

var manifest = wasmrec.Manifest{
	Name: "test",
	For:  wasmrec.Watch{APIVersion: "demo.wasmrec.dev/v1", Kind: "Widget"},
	Permissions: []wasmrec.Permission{
		{Group: "demo.wasmrec.dev", Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		{Group: "demo.wasmrec.dev", Resources: []string{"widgets/status"}, Verbs: []string{"patch"}},
		{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
	},
}

// recorder passes a client's calls to a fake cluster and keeps the writes.
type recorder struct {
	c      *fake.Cluster
	writes []string // "patch status {...}", "update", "create"
}

func (r *recorder) Call(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	switch fn {
	case abi.ImportGet:
	case abi.ImportPatch:
		var p abi.PatchRequest
		_ = json.Unmarshal(req, &p)
		r.writes = append(r.writes, strings.Join(slices.DeleteFunc([]string{"patch", p.Subresource, p.Type, string(p.Patch)}, func(s string) bool { return s == "" }), " "))
	default:
		r.writes = append(r.writes, fn)
	}
	return r.c.Call(ctx, fn, req)
}

func (r *recorder) Log(int32, []byte) {}

func setup(t *testing.T, objs ...*wasmrec.Object) (*fake.Cluster, *recorder, *wasmrec.Client) {
	c := fake.NewCluster(manifest, objs...)
	r := &recorder{c: c}
	return c, r, wasmrec.NewClientWith(r)
}

func configMap(t *testing.T, data string) *wasmrec.Object {
	return obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"demo","name":"web","labels":{"keep":"me"}},"data":`+data+`}`)
}

type createOrX func(context.Context, *wasmrec.Client, *wasmrec.Object, controllerutil.MutateFn) (controllerutil.OperationResult, error)

var both = map[string]createOrX{"CreateOrUpdate": controllerutil.CreateOrUpdate, "CreateOrPatch": controllerutil.CreateOrPatch}

// What the two have in common: create when missing, nothing when mutate changes nothing, and
// the refusals.
func TestCreateOrUpdateAndCreateOrPatch(t *testing.T) {
	ctx := context.Background()
	for name, createOr := range both {
		t.Run(name+": missing: mutate sees the object as given, then it is created", func(t *testing.T) {
			c, rec, client := setup(t)
			cm := wasmrec.NewObject("v1", "ConfigMap", "demo", "web")
			op, err := createOr(ctx, client, cm, func() error {
				if cm.UID() != "" {
					t.Errorf("mutate sees a uid %q on an object that does not exist", cm.UID())
				}
				return cm.SetNested(map[string]any{"a": "1"}, "data")
			})
			if err != nil || op != controllerutil.OperationResultCreated {
				t.Fatalf("= %q, %v; want created", op, err)
			}
			got, ok := c.Get("v1", "ConfigMap", "demo", "web")
			if !ok || jsonOf(t, got, "data") != `{"a":"1"}` {
				t.Fatalf("stored %v", got)
			}
			if cm.UID() == "" || cm.UID() != got.UID() || cm.ResourceVersion() != got.ResourceVersion() {
				t.Errorf("obj is not the object as created: uid %q rv %q, stored %q %q", cm.UID(), cm.ResourceVersion(), got.UID(), got.ResourceVersion())
			}
			if strings.Join(rec.writes, ";") != "create" {
				t.Errorf("writes = %q", rec.writes)
			}
		})

		t.Run(name+": exists, mutate changes nothing: unchanged, nothing written", func(t *testing.T) {
			_, rec, client := setup(t, configMap(t, `{"a":"1","n":"3"}`))
			cm := wasmrec.NewObject("v1", "ConfigMap", "demo", "web")
			op, err := createOr(ctx, client, cm, func() error {
				// The same values as other Go types: 3 and "3" as the API server holds them.
				cm.SetNested(map[string]string{"a": "1", "n": "3"}, "data")
				return cm.SetNested(map[string]any{"keep": "me"}, "metadata", "labels")
			})
			if err != nil || op != controllerutil.OperationResultNone {
				t.Fatalf("= %q, %v; want unchanged", op, err)
			}
			if len(rec.writes) != 0 {
				t.Errorf("writes = %q, want none", rec.writes)
			}
			if cm.UID() == "" {
				t.Error("obj was not read from the cluster")
			}
		})

		t.Run(name+": mutate sees the cluster's object, not what obj held", func(t *testing.T) {
			_, _, client := setup(t, configMap(t, `{"a":"1"}`))
			cm := wasmrec.NewObject("v1", "ConfigMap", "demo", "web")
			cm.SetNested(map[string]any{"set": "before"}, "data")
			var seen string
			_, err := createOr(ctx, client, cm, func() error { seen = jsonOf(t, cm, "data"); return nil })
			if err != nil || seen != `{"a":"1"}` {
				t.Errorf("mutate saw data %s (err %v), want the cluster's", seen, err)
			}
		})

		t.Run(name+": mutate's error is returned, nothing written", func(t *testing.T) {
			for _, objs := range [][]*wasmrec.Object{nil, {configMap(t, `{}`)}} {
				_, rec, client := setup(t, objs...)
				boom := errors.New("boom")
				cm := wasmrec.NewObject("v1", "ConfigMap", "demo", "web")
				op, err := createOr(ctx, client, cm, func() error { cm.SetNested("x", "data", "a"); return boom })
				if !errors.Is(err, boom) || op != controllerutil.OperationResultNone || len(rec.writes) != 0 {
					t.Errorf("exists %v: = %q, %v, writes %q", objs != nil, op, err, rec.writes)
				}
			}
		})

		t.Run(name+": mutate may not change the name or namespace", func(t *testing.T) {
			for _, objs := range [][]*wasmrec.Object{nil, {configMap(t, `{}`)}} {
				for field, value := range map[string]string{"name": "other", "namespace": "elsewhere"} {
					_, rec, client := setup(t, objs...)
					cm := wasmrec.NewObject("v1", "ConfigMap", "demo", "web")
					op, err := createOr(ctx, client, cm, func() error { return cm.SetNested(value, "metadata", field) })
					want := map[string]string{
						"name":      "mutate may not change the name or namespace of ConfigMap demo/web: it made it ConfigMap demo/other",
						"namespace": "mutate may not change the name or namespace of ConfigMap demo/web: it made it ConfigMap elsewhere/web",
					}[field]
					if err == nil || err.Error() != want || op != controllerutil.OperationResultNone || len(rec.writes) != 0 {
						t.Errorf("exists %v, %s: = %q, %v, writes %q; want %q", objs != nil, field, op, err, rec.writes, want)
					}
				}
			}
		})

		t.Run(name+": a get that fails is returned", func(t *testing.T) {
			c, rec, client := setup(t)
			c.SetNamespaces("other")
			op, err := createOr(ctx, client, wasmrec.NewObject("v1", "ConfigMap", "demo", "web"), func() error {
				t.Error("mutate called after a failed get")
				return nil
			})
			if !wasmrec.IsForbidden(err) || op != controllerutil.OperationResultNone || len(rec.writes) != 0 {
				t.Errorf("= %q, %v, writes %q", op, err, rec.writes)
			}
		})

		t.Run(name+": a nil mutate creates the object as given", func(t *testing.T) {
			c, _, client := setup(t)
			op, err := createOr(ctx, client, configMap(t, `{"a":"1"}`), nil)
			if _, ok := c.Get("v1", "ConfigMap", "demo", "web"); err != nil || op != controllerutil.OperationResultCreated || !ok {
				t.Errorf("= %q, %v", op, err)
			}
		})
	}
}

func TestCreateOrUpdateUpdates(t *testing.T) {
	ctx := context.Background()
	c, rec, client := setup(t, configMap(t, `{"a":"1","b":"2"}`))
	cm := wasmrec.NewObject("v1", "ConfigMap", "demo", "web")
	op, err := controllerutil.CreateOrUpdate(ctx, client, cm, func() error {
		return cm.SetNested(map[string]any{"a": "1", "c": "3"}, "data")
	})
	if err != nil || op != controllerutil.OperationResultUpdated {
		t.Fatalf("= %q, %v; want updated", op, err)
	}
	got, _ := c.Get("v1", "ConfigMap", "demo", "web")
	sameJSON(t, "data", jsonOf(t, got, "data"), `{"a":"1","c":"3"}`)
	sameJSON(t, "labels", jsonOf(t, got, "metadata", "labels"), `{"keep":"me"}`)
	if strings.Join(rec.writes, ";") != abi.ImportUpdate || cm.ResourceVersion() != got.ResourceVersion() {
		t.Errorf("writes %q; obj rv %q, stored %q", rec.writes, cm.ResourceVersion(), got.ResourceVersion())
	}

	// The update carries the resourceVersion read: a write in between is a conflict.
	op, err = controllerutil.CreateOrUpdate(ctx, client, cm, func() error {
		c.Put(configMap(t, `{"someone":"else"}`))
		return cm.SetNested("4", "data", "d")
	})
	if !wasmrec.IsConflict(err) || op != controllerutil.OperationResultNone {
		t.Errorf("a write between the get and the update: = %q, %v; want a conflict", op, err)
	}
}

func TestCreateOrUpdateDoesNotWriteStatus(t *testing.T) {
	ctx := context.Background()
	w := obj(t, `{"apiVersion":"demo.wasmrec.dev/v1","kind":"Widget","metadata":{"namespace":"demo","name":"w"},"spec":{"size":1},"status":{"phase":"Old"}}`)
	c, _, client := setup(t, w)
	got := wasmrec.NewObject("demo.wasmrec.dev/v1", "Widget", "demo", "w")
	op, err := controllerutil.CreateOrUpdate(ctx, client, got, func() error {
		got.SetNested(2, "spec", "size")
		return got.SetNested("New", "status", "phase")
	})
	if err != nil || op != controllerutil.OperationResultUpdated {
		t.Fatalf("= %q, %v", op, err)
	}
	stored, _ := c.Get("demo.wasmrec.dev/v1", "Widget", "demo", "w")
	if jsonOf(t, stored, "spec", "size") != "2" || jsonOf(t, stored, "status", "phase") != `"Old"` {
		t.Errorf("stored spec.size %s, status.phase %s; want 2 and the old status", jsonOf(t, stored, "spec", "size"), jsonOf(t, stored, "status", "phase"))
	}
}

func TestCreateOrPatch(t *testing.T) {
	ctx := context.Background()
	widget := `{"apiVersion":"demo.wasmrec.dev/v1","kind":"Widget","metadata":{"namespace":"demo","name":"w","labels":{"a":"1","b":"2"}},` +
		`"spec":{"size":1,"ports":[80,443],"big":12345678901234567890},"status":{"phase":"Old","ready":false}}`
	for _, tc := range []struct {
		name   string
		mutate func(w *wasmrec.Object)
		op     controllerutil.OperationResult
		writes []string
		spec   string
		status string
		labels string
		// otherWriter sets spec.other between the get and the patch.
		otherWriter bool
	}{
		{
			name: "only what mutate changed is sent: a member changed, one removed, a list whole",
			mutate: func(w *wasmrec.Object) {
				w.SetNested(map[string]any{"a": "1"}, "metadata", "labels")
				w.SetNested(2, "spec", "size")
				w.SetNested([]any{80}, "spec", "ports")
			},
			op:     controllerutil.OperationResultUpdated,
			writes: []string{`patch merge {"metadata":{"labels":{"b":null}},"spec":{"ports":[80],"size":2}}`},
			spec:   `{"big":12345678901234567890,"ports":[80],"size":2}`, status: `{"phase":"Old","ready":false}`, labels: `{"a":"1"}`,
		},
		{
			name:   "a status change alone goes to the status subresource",
			mutate: func(w *wasmrec.Object) { w.SetNested("New", "status", "phase") },
			op:     controllerutil.OperationResultUpdatedStatusOnly,
			writes: []string{`patch status merge {"status":{"phase":"New"}}`},
			spec:   `{"big":12345678901234567890,"ports":[80,443],"size":1}`, status: `{"phase":"New","ready":false}`, labels: `{"a":"1","b":"2"}`,
		},
		{
			name: "both: the object, then its status",
			mutate: func(w *wasmrec.Object) {
				w.SetNested(3, "spec", "size")
				w.SetNested(true, "status", "ready")
				delete(w.Object["status"].(map[string]any), "phase")
			},
			op:     controllerutil.OperationResultUpdatedStatus,
			writes: []string{`patch merge {"spec":{"size":3}}`, `patch status merge {"status":{"phase":null,"ready":true}}`},
			spec:   `{"big":12345678901234567890,"ports":[80,443],"size":3}`, status: `{"ready":true}`, labels: `{"a":"1","b":"2"}`,
		},
		{
			name:   "a status removed whole",
			mutate: func(w *wasmrec.Object) { delete(w.Object, "status") },
			op:     controllerutil.OperationResultUpdatedStatusOnly,
			writes: []string{`patch status merge {"status":null}`},
			spec:   `{"big":12345678901234567890,"ports":[80,443],"size":1}`, status: "absent", labels: `{"a":"1","b":"2"}`,
		},
		{
			name:   "fields mutate leaves alone are not sent, a number past float64's digits included",
			mutate: func(w *wasmrec.Object) { w.SetNested("x", "spec", "new") },
			op:     controllerutil.OperationResultUpdated,
			writes: []string{`patch merge {"spec":{"new":"x"}}`},
			spec:   `{"big":12345678901234567890,"new":"x","ports":[80,443],"size":1}`, status: `{"phase":"Old","ready":false}`, labels: `{"a":"1","b":"2"}`,
		},
		{
			name: "the patch carries no resourceVersion: another writer's field is kept",
			mutate: func(w *wasmrec.Object) {
				w.SetNested(5, "spec", "size")
			},
			otherWriter: true,
			op:          controllerutil.OperationResultUpdated,
			writes:      []string{`patch merge {"spec":{"size":5}}`},
			spec:        `{"big":12345678901234567890,"other":"writer","ports":[80,443],"size":5}`, status: `{"phase":"Old","ready":false}`, labels: `{"a":"1","b":"2"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, rec, client := setup(t, obj(t, widget))
			w := wasmrec.NewObject("demo.wasmrec.dev/v1", "Widget", "demo", "w")
			op, err := controllerutil.CreateOrPatch(ctx, client, w, func() error {
				if tc.otherWriter {
					o, _ := c.Get("demo.wasmrec.dev/v1", "Widget", "demo", "w")
					o.SetNested("writer", "spec", "other")
					c.Put(o)
				}
				tc.mutate(w)
				return nil
			})
			if err != nil || op != tc.op {
				t.Fatalf("= %q, %v; want %q", op, err, tc.op)
			}
			if strings.Join(rec.writes, "\n") != strings.Join(tc.writes, "\n") {
				t.Errorf("writes:\n%s\nwant:\n%s", strings.Join(rec.writes, "\n"), strings.Join(tc.writes, "\n"))
			}
			stored, _ := c.Get("demo.wasmrec.dev/v1", "Widget", "demo", "w")
			for _, o := range []*wasmrec.Object{stored, w} { // obj is left as stored
				sameJSON(t, "spec", jsonOf(t, o, "spec"), tc.spec)
				sameJSON(t, "status", jsonOf(t, o, "status"), tc.status)
				sameJSON(t, "labels", jsonOf(t, o, "metadata", "labels"), tc.labels)
			}
			if w.ResourceVersion() != stored.ResourceVersion() {
				t.Errorf("obj's resourceVersion %q, stored %q", w.ResourceVersion(), stored.ResourceVersion())
			}
		})
	}
}

// A failed status patch after the object's patch returns the error with what was done.
func TestCreateOrPatchStatusPatchFails(t *testing.T) {
	c, _, client := setup(t, obj(t, `{"apiVersion":"demo.wasmrec.dev/v1","kind":"Widget","metadata":{"namespace":"demo","name":"w"},"spec":{"size":1}}`))
	c.SetGrant(manifest.Permissions[0], manifest.Permissions[2]) // no patch on widgets/status
	w := wasmrec.NewObject("demo.wasmrec.dev/v1", "Widget", "demo", "w")
	op, err := controllerutil.CreateOrPatch(context.Background(), client, w, func() error {
		w.SetNested(2, "spec", "size")
		return w.SetNested("New", "status", "phase")
	})
	if !wasmrec.IsForbidden(err) || op != controllerutil.OperationResultUpdated {
		t.Errorf("= %q, %v; want updated and forbidden", op, err)
	}
	if jsonOf(t, w, "status") != `{"phase":"New"}` {
		t.Errorf("obj's status %s, want what mutate set", jsonOf(t, w, "status"))
	}
}
