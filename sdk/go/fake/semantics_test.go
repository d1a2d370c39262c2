package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

// must returns v, or panics (failing the test) on an error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCreateSetsWhatTheAPIServerSets(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster(manifest())
	cl := c.Client()
	a := must(cl.Create(ctx, cm("demo", "a", nil)))
	b := must(cl.Create(ctx, cm("demo", "b", nil)))
	for _, o := range []*wasmrec.Object{a, b} {
		if o.UID() == "" || o.ResourceVersion() == "" || o.Generation() != 1 {
			t.Errorf("%s: uid %q, resourceVersion %q, generation %d; want all set, generation 1", o.Name(), o.UID(), o.ResourceVersion(), o.Generation())
		}
		ts, _ := o.NestedString("metadata", "creationTimestamp")
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("%s: creationTimestamp %q: %v", o.Name(), ts, err)
		}
	}
	if a.UID() == b.UID() || a.ResourceVersion() == b.ResourceVersion() {
		t.Errorf("two objects share uid or resourceVersion: %q %q, %q %q", a.UID(), b.UID(), a.ResourceVersion(), b.ResourceVersion())
	}
	if got := mustGet(t, c, "v1", "ConfigMap", "demo", "a"); got.ResourceVersion() != a.ResourceVersion() {
		t.Errorf("the stored object has resourceVersion %q, create returned %q", got.ResourceVersion(), a.ResourceVersion())
	}

	gen := cm("demo", "", nil)
	gen.SetNested("web-", "metadata", "generateName")
	g1 := must(cl.Create(ctx, gen))
	g2 := must(cl.Create(ctx, gen))
	if !strings.HasPrefix(g1.Name(), "web-") || len(g1.Name()) != len("web-")+5 || g1.Name() == g2.Name() {
		t.Errorf("generateName web- made %q and %q", g1.Name(), g2.Name())
	}
}

func TestUpdateSemantics(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster(manifest(), app("demo", "web"))
	cl := c.Client()
	a := mustGet(t, c, appV1, "App", "demo", "web")
	rv0, gen0 := a.ResourceVersion(), a.Generation()

	// A label: new resourceVersion, same generation.
	a.SetNested(map[string]any{"x": "y"}, "metadata", "labels")
	a = must(cl.Update(ctx, a))
	if a.ResourceVersion() == rv0 || a.Generation() != gen0 {
		t.Errorf("label update: resourceVersion %q (was %q), generation %d (was %d); want a new resourceVersion, the same generation", a.ResourceVersion(), rv0, a.Generation(), gen0)
	}
	// The spec: generation + 1. Status in an update is ignored.
	a.SetNested(9090, "spec", "port")
	a.SetNested(true, "status", "ready")
	a = must(cl.Update(ctx, a))
	if a.Generation() != gen0+1 {
		t.Errorf("spec update: generation %d, want %d", a.Generation(), gen0+1)
	}
	if ready, _ := a.Nested("status", "ready"); ready != false {
		t.Errorf("update changed status.ready to %v: status is the status subresource's", ready)
	}
	// Nothing changed: the same resourceVersion.
	rv := a.ResourceVersion()
	if again := must(cl.Update(ctx, a)); again.ResourceVersion() != rv {
		t.Errorf("a no-op update moved resourceVersion %q to %q", rv, again.ResourceVersion())
	}
	// update_status changes only status.
	a.SetNested(true, "status", "ready")
	a.SetNested(1, "spec", "port")
	a.SetNested(map[string]any{"changed": "by-status"}, "metadata", "labels")
	s := must(cl.Status().Update(ctx, a))
	if ready, _ := s.Nested("status", "ready"); ready != true {
		t.Errorf("update_status: status.ready %v, want true", ready)
	}
	if port, _ := s.NestedInt64("spec", "port"); port != 9090 || s.Labels()["changed"] != "" || s.Generation() != gen0+1 {
		t.Errorf("update_status changed spec.port to %d, labels to %v or generation to %d", port, s.Labels(), s.Generation())
	}
	// Integers keep their digits.
	a = mustGet(t, c, appV1, "App", "demo", "web")
	a.Object["spec"] = map[string]any{"big": int64(9007199254740993)}
	must(cl.Update(ctx, a))
	var typed struct {
		Spec struct{ Big int64 }
	}
	if err := cl.GetInto(ctx, appV1, "App", "demo", "web", &typed); err != nil || typed.Spec.Big != 9007199254740993 {
		t.Errorf("spec.big = %d (%v), want 9007199254740993", typed.Spec.Big, err)
	}
}

func TestListAndLabelSelectors(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster(manifest(),
		cm("demo", "web-a", map[string]any{"app": "web", "tier": "a", "n": "3"}),
		cm("demo", "web-b", map[string]any{"app": "web", "tier": "b", "n": "10"}),
		cm("demo", "db", map[string]any{"app": "db"}),
		cm("demo", "bare", nil),
		cm("other", "web-c", map[string]any{"app": "web", "tier": "c"}),
	)
	cl := c.Client()
	for _, tc := range []struct {
		ns, selector string
		want         string // namespace/name, sorted
		bad          bool
	}{
		{"", "", "demo/bare demo/db demo/web-a demo/web-b other/web-c", false},
		{"demo", "", "demo/bare demo/db demo/web-a demo/web-b", false},
		{"", "app=web", "demo/web-a demo/web-b other/web-c", false},
		{"", "app==web", "demo/web-a demo/web-b other/web-c", false},
		{"", "app!=web", "demo/bare demo/db", false},
		{"", "app = web , tier != b", "demo/web-a other/web-c", false},
		{"", "tier in (a,c)", "demo/web-a other/web-c", false},
		{"", "tier notin (a,c)", "demo/bare demo/db demo/web-b", false},
		{"", "tier", "demo/web-a demo/web-b other/web-c", false},
		{"", "!tier", "demo/bare demo/db", false},
		{"", "app,!tier", "demo/db", false},
		{"", "n>5", "demo/web-b", false},
		{"", "n<5", "demo/web-a", false},
		{"", "n>3", "demo/web-b", false},
		{"", "app=", "", false},
		{"", "app in (web, db),tier notin (b)", "demo/db demo/web-a other/web-c", false},
		{"", "app in (b", "", true},
		{"", "app in ()", "", false}, // the empty value, as labels.Parse reads it
		{"", "tier notin ()", "demo/bare demo/db demo/web-a demo/web-b other/web-c", false},
		{"", "app=web,", "", true},
		{"", "=web", "", true},
		{"", "app=we b", "", true},
		{"", "bad key=x", "", true},
		{"", "app=not/valid", "", true},
		{"", "n>x", "", true},
		{"", "app ~ web", "", true},
	} {
		t.Run(tc.ns+"/"+tc.selector, func(t *testing.T) {
			objs, err := cl.List(ctx, "v1", "ConfigMap", tc.ns, tc.selector)
			if tc.bad {
				if statusOf(err) != abi.StatusBadRequest {
					t.Fatalf("List(%q) = %v, want bad request", tc.selector, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.Namespace()+"/"+o.Name())
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("List(%q, %q) = %v, want %v", tc.ns, tc.selector, got, tc.want)
			}
		})
	}

	t.Run("across namespaces with SetNamespaces", func(t *testing.T) {
		c.SetNamespaces("other")
		defer c.SetNamespaces()
		objs, err := cl.List(ctx, "v1", "ConfigMap", "", "")
		if err != nil || len(objs) != 1 || objs[0].Name() != "web-c" {
			t.Errorf("List across namespaces limited to other = %d objects, %v; want web-c only", len(objs), err)
		}
	})
}

func TestPatches(t *testing.T) {
	ctx := context.Background()
	base := func() *wasmrec.Object {
		o := object("v1", "ConfigMap", "demo", "cm", map[string]any{
			"data": map[string]any{"a": "1", "b": "2"},
			"list": []any{"x", "y"},
		})
		o.SetNested(map[string]any{"keep": "me"}, "metadata", "labels")
		return o
	}
	for _, tc := range []struct {
		name, typ string
		patch     string
		want      string // JSON of the fields data, list and labels after the patch
		status    abi.Status
	}{
		{"merge sets and removes", abi.PatchMerge, `{"data":{"a":null,"c":"3"},"metadata":{"labels":{"new":"l"}}}`,
			`{"data":{"b":"2","c":"3"},"labels":{"keep":"me","new":"l"},"list":["x","y"]}`, 0},
		{"merge replaces lists", abi.PatchMerge, `{"list":["z"]}`, `{"data":{"a":"1","b":"2"},"labels":{"keep":"me"},"list":["z"]}`, 0},
		{"merge deletes a map", abi.PatchMerge, `{"data":null}`, `{"labels":{"keep":"me"},"list":["x","y"]}`, 0},
		{"strategic sets and removes", abi.PatchStrategic, `{"data":{"b":null}}`, `{"data":{"a":"1"},"labels":{"keep":"me"},"list":["x","y"]}`, 0},
		{"strategic adds an object", abi.PatchStrategic, `{"metadata":{"labels":{"new":"l"}},"spec":{"template":{"x":"y"}}}`, `{"data":{"a":"1","b":"2"},"labels":{"keep":"me","new":"l"},"list":["x","y"]}`, 0},
		{"strategic replaces a list it has no order for", abi.PatchStrategic, `{"list":["z"]}`, `{"data":{"a":"1","b":"2"},"labels":{"keep":"me"},"list":["z"]}`, 0},
		{"strategic merges a list of values it has an order for", abi.PatchStrategic, `{"list":["z"],"$setElementOrder/list":["z","y","x"]}`,
			`{"data":{"a":"1","b":"2"},"labels":{"keep":"me"},"list":["z","y","x"]}`, 0},
		{"strategic deletes from a list of values", abi.PatchStrategic, `{"$deleteFromPrimitiveList/list":["x"],"$setElementOrder/list":["y"]}`,
			`{"data":{"a":"1","b":"2"},"labels":{"keep":"me"},"list":["y"]}`, 0},
		{"strategic replaces an object", abi.PatchStrategic, `{"data":{"$patch":"replace","c":"3"}}`, `{"data":{"c":"3"},"labels":{"keep":"me"},"list":["x","y"]}`, 0},
		{"strategic retains keys", abi.PatchStrategic, `{"data":{"$retainKeys":["b","c"],"c":"3"}}`, `{"data":{"b":"2","c":"3"},"labels":{"keep":"me"},"list":["x","y"]}`, 0},
		{"strategic with a member named like a directive", abi.PatchStrategic, `{"data":{"$frob":"1"}}`, `{"data":{"$frob":"1","a":"1","b":"2"},"labels":{"keep":"me"},"list":["x","y"]}`, 0},
		{"json add, replace, remove", abi.PatchJSON,
			`[{"op":"add","path":"/data/c","value":"3"},{"op":"replace","path":"/data/a","value":"9"},{"op":"remove","path":"/data/b"}]`,
			`{"data":{"a":"9","c":"3"},"labels":{"keep":"me"},"list":["x","y"]}`, 0},
		{"json array insert and append", abi.PatchJSON, `[{"op":"add","path":"/list/0","value":"w"},{"op":"add","path":"/list/-","value":"z"}]`,
			`{"data":{"a":"1","b":"2"},"labels":{"keep":"me"},"list":["w","x","y","z"]}`, 0},
		{"json move and copy", abi.PatchJSON, `[{"op":"move","from":"/data/a","path":"/data/m"},{"op":"copy","from":"/list/1","path":"/list/0"}]`,
			`{"data":{"b":"2","m":"1"},"labels":{"keep":"me"},"list":["y","x","y"]}`, 0},
		{"json escaped pointer", abi.PatchJSON, `[{"op":"add","path":"/metadata/labels/example.com~1team","value":"t"}]`,
			`{"data":{"a":"1","b":"2"},"labels":{"example.com/team":"t","keep":"me"},"list":["x","y"]}`, 0},
		{"json test passes", abi.PatchJSON, `[{"op":"test","path":"/data/a","value":"1"},{"op":"remove","path":"/list/0"}]`,
			`{"data":{"a":"1","b":"2"},"labels":{"keep":"me"},"list":["y"]}`, 0},
		{"json test fails: nothing applied", abi.PatchJSON, `[{"op":"remove","path":"/list/0"},{"op":"test","path":"/data/a","value":"2"}]`, "", abi.StatusInvalid},
		{"json remove of a missing member", abi.PatchJSON, `[{"op":"remove","path":"/data/zz"}]`, "", abi.StatusInvalid},
		{"json index out of range", abi.PatchJSON, `[{"op":"add","path":"/list/5","value":"q"}]`, "", abi.StatusInvalid},
		{"json unknown op", abi.PatchJSON, `[{"op":"frob","path":"/data"}]`, "", abi.StatusInvalid},
		{"json move into its child", abi.PatchJSON, `[{"op":"move","from":"/data","path":"/data/x"}]`, "", abi.StatusInvalid},
		{"json bad label", abi.PatchJSON, `[{"op":"add","path":"/metadata/labels/x","value":"bad value"}]`, "", abi.StatusInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewCluster(manifest(), base())
			before := mustGet(t, c, "v1", "ConfigMap", "demo", "cm")
			out, err := c.Client().Patch(ctx, ref("v1", "ConfigMap", "demo", "cm"), tc.typ, []byte(tc.patch))
			if statusOf(err) != tc.status {
				t.Fatalf("status %v (%v), want %v", statusOf(err), err, tc.status)
			}
			after := mustGet(t, c, "v1", "ConfigMap", "demo", "cm")
			if err != nil {
				if !reflect.DeepEqual(before.Object, after.Object) {
					t.Errorf("a failed patch changed the object:\n%v\n%v", before.Object, after.Object)
				}
				return
			}
			got := map[string]any{}
			for _, f := range []string{"data", "list"} {
				if v, ok := after.Object[f]; ok {
					got[f] = v
				}
			}
			if labels, ok := after.NestedMap("metadata", "labels"); ok {
				got["labels"] = labels
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("after the patch:\n got %v\nwant %v", got, want)
			}
			if out.ResourceVersion() == before.ResourceVersion() {
				t.Error("the patch did not move resourceVersion")
			}
		})
	}
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster(manifest(), app("demo", "web"))
	cl := c.Client()

	// Creates what is missing.
	desired := cm("demo", "child", map[string]any{"app": "web"})
	desired.Object["data"] = map[string]any{"a": "1", "b": "2"}
	got := must(cl.Apply(ctx, desired, true))
	if got.UID() == "" || got.Generation() != 1 || got.Labels()["app"] != "web" {
		t.Fatalf("apply did not create the object as create does: %v", got.Object)
	}

	// Someone else adds a field; the plugin stops applying b.
	o := mustGet(t, c, "v1", "ConfigMap", "demo", "child")
	o.SetNested("theirs", "data", "other")
	must(cl.Update(ctx, o))
	desired.Object["data"] = map[string]any{"a": "9"}
	got = must(cl.Apply(ctx, desired, false))
	data, _ := got.NestedMap("data")
	if !reflect.DeepEqual(data, map[string]any{"a": "9", "other": "theirs"}) {
		t.Errorf("after applying data.a only: data %v, want a=9 (changed), b gone (no longer applied), other kept (not the plugin's)", data)
	}

	// The same apply again changes nothing.
	rv := got.ResourceVersion()
	if again := must(cl.Apply(ctx, desired, false)); again.ResourceVersion() != rv {
		t.Errorf("a repeated apply moved resourceVersion %q to %q", rv, again.ResourceVersion())
	}

	// The main resource ignores status; the status subresource takes only status.
	a := app("demo", "web")
	a.Object["spec"] = map[string]any{"port": 1}
	a.Object["status"] = map[string]any{"ready": true, "observedGeneration": 1}
	got = must(cl.Status().Apply(ctx, a, true))
	if port, _ := got.NestedInt64("spec", "port"); port != 8080 {
		t.Errorf("status apply changed spec.port to %d", port)
	}
	if ready, _ := got.Nested("status", "ready"); ready != true {
		t.Errorf("status apply: status.ready %v, want true", ready)
	}
	delete(a.Object["status"].(map[string]any), "ready")
	got = must(cl.Status().Apply(ctx, a, true))
	if _, has := got.Nested("status", "ready"); has {
		t.Errorf("status.ready is no longer applied and stays: %v", got.Object["status"])
	}

	// A stale resourceVersion in the applied object is a conflict.
	desired.SetNested("1", "metadata", "resourceVersion")
	if _, err := cl.Apply(ctx, desired, true); !wasmrec.IsConflict(err) {
		t.Errorf("apply with a stale resourceVersion = %v, want conflict", err)
	}
}

func TestFinalizers(t *testing.T) {
	ctx := context.Background()
	o := cm("demo", "f", nil)
	o.SetNested([]any{"example.com/cleanup"}, "metadata", "finalizers")
	c := fake.NewCluster(manifest(), o)
	cl := c.Client()
	gen := mustGet(t, c, "v1", "ConfigMap", "demo", "f").Generation()
	if err := cl.Delete(ctx, ref("v1", "ConfigMap", "demo", "f"), wasmrec.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held := mustGet(t, c, "v1", "ConfigMap", "demo", "f")
	if ts, _ := held.NestedString("metadata", "deletionTimestamp"); ts == "" || held.Generation() != gen+1 {
		t.Fatalf("an object with a finalizer was deleted at once, or got no deletionTimestamp and generation+1: %v", held.Object["metadata"])
	}
	held.SetNested([]any{"example.com/cleanup", "example.com/more"}, "metadata", "finalizers")
	if _, err := cl.Update(ctx, held); !wasmrec.IsInvalid(err) {
		t.Errorf("adding a finalizer to an object being deleted = %v, want invalid", err)
	}
	held.SetNested([]any{}, "metadata", "finalizers")
	if _, err := cl.Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("v1", "ConfigMap", "demo", "f"); ok {
		t.Error("the object stays after its last finalizer was removed")
	}
}

func TestEventsAndLogs(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster(manifest(), app("demo", "web"), object("v1", "Namespace", "", "demo", nil))
	var logged []string
	c.LogTo(func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) })
	cl := c.Client()
	r := wasmrec.ReconcilerFunc(func(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
		if err := cl.Event(ctx, "Warning", "BadPort", "spec.port is out of range"); err != nil {
			return wasmrec.Result{}, err
		}
		if err := cl.EventFor(ctx, ref("v1", "Namespace", "", "demo"), "Normal", "Seen", "namespace seen"); err != nil {
			return wasmrec.Result{}, err
		}
		wasmrec.Log.Info("reconciled", "app", req, "port", 8080, "odd")
		wasmrec.Log.Error(errors.New("boom"), "failed")
		return wasmrec.Result{RequeueAfter: time.Minute}, nil
	})
	res, err := c.Reconcile(ctx, r, wasmrec.NewRequest("demo", "web"))
	if err != nil || res.RequeueAfter != time.Minute {
		t.Fatalf("Reconcile = %v, %v", res, err)
	}
	events := c.Events()
	want := []fake.Event{
		{Object: ref(appV1, "App", "demo", "web"), UID: mustGet(t, c, appV1, "App", "demo", "web").UID(), Namespace: "demo",
			Type: "Warning", Reason: "BadPort", Message: "spec.port is out of range"},
		{Object: ref("v1", "Namespace", "", "demo"), Namespace: "default", Type: "Normal", Reason: "Seen", Message: "namespace seen"},
	}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events:\n got %+v\nwant %+v", events, want)
	}
	logs := c.Logs()
	if len(logs) != 2 {
		t.Fatalf("logs = %v, want 2 lines", logs)
	}
	if got, want := logs[0].String(), "info reconciled app=demo/web port=8080 odd=(MISSING)"; got != want {
		t.Errorf("log line %q, want %q", got, want)
	}
	if v, _ := logs[0].Value("port"); v != 8080.0 {
		t.Errorf("port = %#v, want the number 8080", v)
	}
	if logs[0].Request.Name != "web" || logs[1].Level != abi.LogError {
		t.Errorf("logs carry request %v and level %d", logs[0].Request, logs[1].Level)
	}
	if got := logs[1].String(); got != "error failed error=boom" {
		t.Errorf("error line %q", got)
	}
	if len(logged) != 2 || logged[0] != logs[0].String() {
		t.Errorf("LogTo got %q", logged)
	}
	// After Reconcile, an Event without an object has nothing to be about.
	if err := cl.Event(ctx, "Normal", "Late", ""); statusOf(err) != abi.StatusBadRequest {
		t.Errorf("an event after Reconcile = %v, want bad request", err)
	}
	wasmrec.Log.Info("outside") // not captured
	if len(c.Logs()) != 2 {
		t.Errorf("a line logged outside Reconcile was captured")
	}
	// What follows a NUL and is not one JSON array stays text, as the host reads it.
	fake.RawLog(c, abi.LogWarn, "half\x00[\"k\",")
	fake.RawLog(c, abi.LogWarn, "two\x00[1,2] []")
	fake.RawLog(c, abi.LogWarn, "keys\x00[1,2,\"odd\"]")
	var got []string
	for _, l := range c.Logs()[2:] {
		got = append(got, l.String())
	}
	if want := []string{`warn half ["k",`, `warn two [1,2] []`, `warn keys 1=2 odd=(MISSING)`}; !reflect.DeepEqual(got, want) {
		t.Errorf("raw lines:\n got %q\nwant %q", got, want)
	}
}

func TestReconcileRefusesWhatTheHostRefuses(t *testing.T) {
	noop := wasmrec.ReconcilerFunc(func(context.Context, wasmrec.Request) (wasmrec.Result, error) {
		t.Error("the reconciler ran")
		return wasmrec.Result{}, nil
	})
	req := wasmrec.NewRequest("demo", "web")

	m := manifest()
	m.Permissions = m.Permissions[1:] // no list and watch on apps
	_, err := fake.NewCluster(m).Reconcile(context.Background(), noop, req)
	if err == nil || !strings.Contains(err.Error(), "watching App.v1.demo.wasmrec.dev needs list demo.wasmrec.dev/apps, watch demo.wasmrec.dev/apps") {
		t.Errorf("a manifest without list and watch on its For kind: %v", err)
	}

	m = manifest()
	m.Owns = append(m.Owns, wasmrec.Watch{APIVersion: "v1", Kind: "ConfigMaps"})
	_, err = fake.NewCluster(m).Reconcile(context.Background(), noop, req)
	if err == nil || !strings.Contains(err.Error(), "watching ConfigMaps.v1: v1 has no kind ConfigMaps: did you mean ConfigMap?") {
		t.Errorf("a manifest owning a kind the core group does not have: %v", err)
	}

	c := fake.NewCluster(manifest()).SetGrant(perm("demo.wasmrec.dev", "apps", "list", "watch"))
	_, err = c.Reconcile(context.Background(), noop, req)
	if err == nil || !strings.Contains(err.Error(), "asks for permissions it was not granted") {
		t.Errorf("a manifest asking for more than the grant: %v", err)
	}
}

func TestKinds(t *testing.T) {
	for kind, want := range map[string]string{
		"ConfigMap": "configmaps", "NetworkPolicy": "networkpolicies", "Gateway": "gateways", "Ingress": "ingresses",
		"Box": "boxes", "Patch": "patches", "Mesh": "meshes", "Endpoints": "endpoints", "App": "apps",
		"Policy": "policies", "Key": "keys", "ComponentStatus": "componentstatuses",
	} {
		if got := fake.Plural(kind); got != want {
			t.Errorf("Plural(%q) = %q, want %q", kind, got, want)
		}
	}

	ctx := context.Background()
	m := manifest()
	m.Permissions = append(m.Permissions,
		perm("demo.wasmrec.dev", "octopi", "get", "list", "watch"),
		perm("demo.wasmrec.dev", "clusterthings", "get", "list", "watch"),
		perm("rbac.authorization.k8s.io", "clusterroles", "get", "list", "watch"))
	c := fake.NewCluster(m).
		RegisterKind("demo.wasmrec.dev", "Octopus", "octopi", true).
		RegisterKind("demo.wasmrec.dev", "ClusterThing", "", false)
	c.Put(object(appV1, "Octopus", "demo", "o", nil), object(appV1, "ClusterThing", "", "t", nil),
		object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r", nil))
	cl := c.Client()
	if _, err := cl.Get(ctx, appV1, "Octopus", "demo", "o"); err != nil {
		t.Errorf("a registered plural: %v", err)
	}
	if _, err := cl.Get(ctx, appV1, "ClusterThing", "", "t"); err != nil {
		t.Errorf("a registered cluster-scoped kind: %v", err)
	}
	if _, err := cl.Get(ctx, appV1, "ClusterThing", "demo", "t"); statusOf(err) != abi.StatusBadRequest {
		t.Errorf("a cluster-scoped kind with a namespace = %v, want bad request", err)
	}
	if _, err := cl.Get(ctx, "rbac.authorization.k8s.io/v1", "ClusterRole", "", "r"); err != nil {
		t.Errorf("a built-in cluster-scoped kind: %v", err)
	}
	if _, err := cl.Get(ctx, appV1, "Octopuses", "demo", "o"); !wasmrec.IsForbidden(err) {
		t.Errorf("an unregistered kind gets the guessed plural (octopuseses), which the manifest lacks: %v", err)
	}
}

func TestPutReplacesAndRemoveDeletes(t *testing.T) {
	c := fake.NewCluster(manifest(), cm("demo", "a", nil))
	first := mustGet(t, c, "v1", "ConfigMap", "demo", "a")
	next := cm("demo", "a", map[string]any{"v": "2"})
	c.Put(next)
	second := mustGet(t, c, "v1", "ConfigMap", "demo", "a")
	if second.Labels()["v"] != "2" || second.ResourceVersion() == first.ResourceVersion() {
		t.Errorf("Put did not replace the object with a new resourceVersion: %v", second.Object)
	}
	if !c.Remove("v1", "ConfigMap", "demo", "a") || c.Remove("v1", "ConfigMap", "demo", "a") {
		t.Error("Remove: true for the object, then false")
	}
	if objs := c.Objects("v1", "ConfigMap"); len(objs) != 0 {
		t.Errorf("Objects after Remove = %d", len(objs))
	}
	defer func() {
		if recover() == nil {
			t.Error("Put of a cluster-scoped object with a namespace did not panic")
		}
	}()
	c.Put(object("v1", "Namespace", "demo", "x", nil))
}
