package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

func configMap(t *testing.T, s string) *wasmrec.Object {
	t.Helper()
	o := &wasmrec.Object{}
	if err := json.Unmarshal([]byte(s), &o.Object); err != nil {
		t.Fatal(err)
	}
	return o
}

func source(t *testing.T, data string) *wasmrec.Object {
	return configMap(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"demo","name":"settings","labels":{"wasmrec.dev/mirror":"true","team":"a"}},"data":`+data+`}`)
}

func jsonAt(t *testing.T, o *wasmrec.Object, fields ...string) string {
	t.Helper()
	v, ok := o.Nested(fields...)
	if !ok {
		return "absent"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

type env struct {
	t *testing.T
	c *fake.Cluster
	r *Reconciler
}

func newEnv(t *testing.T, objs ...*wasmrec.Object) *env {
	c := fake.NewCluster(Manifest, objs...).LogTo(t.Logf)
	return &env{t: t, c: c, r: &Reconciler{Client: c.Client()}}
}

func (e *env) reconcile(name string) error {
	e.t.Helper()
	_, err := e.c.Reconcile(context.Background(), e.r, wasmrec.NewRequest("demo", name))
	return err
}

// copyOf returns the copy, failing the test unless it holds data and is controlled by the
// source.
func (e *env) copyOf(data string) *wasmrec.Object {
	t := e.t
	t.Helper()
	cp, ok := e.c.Get("v1", "ConfigMap", "demo", "settings-mirror")
	if !ok {
		t.Fatal("no copy settings-mirror")
	}
	if got := jsonAt(t, cp, "data"); got != data {
		t.Errorf("copy's data = %s, want %s", got, data)
	}
	src, _ := e.c.Get("v1", "ConfigMap", "demo", "settings")
	want := `[{"apiVersion":"v1","blockOwnerDeletion":true,"controller":true,"kind":"ConfigMap","name":"settings","uid":"` + src.UID() + `"}]`
	if got := jsonAt(t, cp, "metadata", "ownerReferences"); got != want {
		t.Errorf("copy's ownerReferences = %s, want %s", got, want)
	}
	if got := jsonAt(t, cp, "metadata", "labels"); got != "absent" {
		t.Errorf("copy's labels = %s: a copy with the source's label would be mirrored too", got)
	}
	return cp
}

func (e *env) lastLog() string {
	logs := e.c.Logs()
	if len(logs) == 0 {
		return ""
	}
	return logs[len(logs)-1].String()
}

func TestCreatesTheCopyAndKeepsItInStep(t *testing.T) {
	e := newEnv(t, source(t, `{"color":"blue","size":"L"}`))
	if err := e.reconcile("settings"); err != nil {
		t.Fatal(err)
	}
	e.copyOf(`{"color":"blue","size":"L"}`)
	if got, want := e.lastLog(), "info mirrored configmap=demo/settings copy=settings-mirror operation=created"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}

	// Nothing changed: nothing is written, nothing logged.
	before := e.copyOf(`{"color":"blue","size":"L"}`).ResourceVersion()
	if err := e.reconcile("settings"); err != nil {
		t.Fatal(err)
	}
	if after := e.copyOf(`{"color":"blue","size":"L"}`).ResourceVersion(); after != before || len(e.c.Logs()) != 1 {
		t.Errorf("an unchanged source wrote the copy (resourceVersion %s to %s) or logged %d lines", before, after, len(e.c.Logs()))
	}

	// The source changes: a key changed, one removed, one added, and binaryData.
	src := source(t, `{"color":"green","shape":"round"}`)
	src.SetNested(map[string]any{"logo": "aGk="}, "binaryData")
	e.c.Put(src)
	if err := e.reconcile("settings"); err != nil {
		t.Fatal(err)
	}
	cp := e.copyOf(`{"color":"green","shape":"round"}`)
	if got := jsonAt(t, cp, "binaryData"); got != `{"logo":"aGk="}` {
		t.Errorf("copy's binaryData = %s", got)
	}
	if got, want := e.lastLog(), "info mirrored configmap=demo/settings copy=settings-mirror operation=updated"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}

	// The source loses its data and binaryData: so does the copy.
	e.c.Put(configMap(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"demo","name":"settings","labels":{"wasmrec.dev/mirror":"true"}}}`))
	if err := e.reconcile("settings"); err != nil {
		t.Fatal(err)
	}
	cp = e.copyOf("absent")
	if got := jsonAt(t, cp, "binaryData"); got != "absent" {
		t.Errorf("copy's binaryData = %s, want none", got)
	}
}

func TestPutsBackAnEditedOrDeletedCopy(t *testing.T) {
	e := newEnv(t, source(t, `{"color":"blue"}`))
	if err := e.reconcile("settings"); err != nil {
		t.Fatal(err)
	}
	cp := e.copyOf(`{"color":"blue"}`)

	// Someone edits the copy: the Owns watch enqueues the source, and the copy is put back.
	cp.SetNested(map[string]any{"color": "red", "extra": "x"}, "data")
	e.c.Put(cp)
	if err := e.reconcile("settings"); err != nil {
		t.Fatal(err)
	}
	e.copyOf(`{"color":"blue"}`)

	// Someone deletes it: made again.
	e.c.Remove("v1", "ConfigMap", "demo", "settings-mirror")
	if err := e.reconcile("settings"); err != nil {
		t.Fatal(err)
	}
	e.copyOf(`{"color":"blue"}`)
}

func TestLeavesUnlabelledConfigMapsAlone(t *testing.T) {
	for _, labels := range []string{`{}`, `{"wasmrec.dev/mirror":"false"}`} {
		e := newEnv(t, configMap(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"demo","name":"settings","labels":`+labels+`},"data":{"a":"1"}}`))
		if err := e.reconcile("settings"); err != nil {
			t.Fatal(err)
		}
		if objs := e.c.Objects("v1", "ConfigMap"); len(objs) != 1 {
			t.Errorf("labels %s: %d ConfigMaps, want the source alone", labels, len(objs))
		}
		if len(e.c.Logs()) != 0 || len(e.c.Events()) != 0 {
			t.Errorf("labels %s: logged %v, events %v", labels, e.c.Logs(), e.c.Events())
		}
	}
	// A source deleted is no error: the garbage collector takes its copy.
	if err := newEnv(t).reconcile("settings"); err != nil {
		t.Errorf("a deleted source: %v", err)
	}
}

func TestRefusesACopyNameAnotherControllerOwns(t *testing.T) {
	taken := configMap(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"demo","name":"settings-mirror",`+
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u-web","controller":true}]},"data":{"theirs":"1"}}`)
	e := newEnv(t, source(t, `{"color":"blue"}`), taken)
	err := e.reconcile("settings")
	const want = "ConfigMap demo/settings-mirror is already owned by another Deployment controller web"
	if err == nil || err.Error() != want || !wasmrec.IsTerminal(err) {
		t.Fatalf("err = %v, want the terminal error %q", err, want)
	}
	events := e.c.Events()
	if len(events) != 1 || events[0].Type != "Warning" || events[0].Reason != "CopyNameTaken" || events[0].Message != want ||
		events[0].Object.Name != "settings" {
		t.Errorf("events = %+v, want one Warning CopyNameTaken about the source", events)
	}
	cp, _ := e.c.Get("v1", "ConfigMap", "demo", "settings-mirror")
	if got := jsonAt(t, cp, "data"); got != `{"theirs":"1"}` || !strings.Contains(jsonAt(t, cp, "metadata", "ownerReferences"), "Deployment") {
		t.Errorf("the other controller's ConfigMap was changed: data %s, owners %s", got, jsonAt(t, cp, "metadata", "ownerReferences"))
	}
}

// A <name>-mirror no controller owns is adopted, as SetControllerReference does.
func TestAdoptsAnUnownedCopy(t *testing.T) {
	e := newEnv(t, source(t, `{"color":"blue"}`),
		configMap(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"demo","name":"settings-mirror"},"data":{"old":"1"}}`))
	if err := e.reconcile("settings"); err != nil {
		t.Fatal(err)
	}
	e.copyOf(`{"color":"blue"}`)
}
