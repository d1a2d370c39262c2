package fake_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/fake"
)

const appV1 = "demo.wasmrec.dev/v1"

func perm(group string, resources string, verbs ...string) wasmrec.Permission {
	return wasmrec.Permission{Group: group, Resources: strings.Fields(resources), Verbs: verbs}
}

// manifest is an App plugin's: it reads Apps and writes their status, and manages ConfigMaps.
func manifest() wasmrec.Manifest {
	return wasmrec.Manifest{
		Name: "app",
		For:  wasmrec.Watch{APIVersion: appV1, Kind: "App"},
		Owns: []wasmrec.Watch{{APIVersion: "v1", Kind: "ConfigMap"}},
		Permissions: []wasmrec.Permission{
			perm("demo.wasmrec.dev", "apps", "get", "list", "watch", "update", "patch", "create", "delete"),
			perm("demo.wasmrec.dev", "apps/status", "update", "patch"),
			perm("", "configmaps", "get", "list", "watch", "create", "update", "patch", "delete"),
			perm("", "configmaps/status", "update", "patch"),
			perm("", "secrets", "list", "watch"),
			perm("", "namespaces", "get", "list", "watch"),
			perm("", "events", "create"),
		},
	}
}

func object(apiVersion, kind, ns, name string, fields map[string]any) *wasmrec.Object {
	o := wasmrec.NewObject(apiVersion, kind, ns, name)
	for k, v := range fields {
		if k == "labels" || k == "finalizers" || k == "annotations" {
			o.SetNested(v, "metadata", k)
			continue
		}
		o.Object[k] = v
	}
	return o
}

func app(ns, name string) *wasmrec.Object {
	return object(appV1, "App", ns, name, map[string]any{"spec": map[string]any{"port": 8080}, "status": map[string]any{"ready": false}})
}

func cm(ns, name string, labels map[string]any) *wasmrec.Object {
	o := object("v1", "ConfigMap", ns, name, map[string]any{"data": map[string]any{"k": "v"}})
	if labels != nil {
		o.SetNested(labels, "metadata", "labels")
	}
	return o
}

func ref(apiVersion, kind, ns, name string) wasmrec.ObjectRef {
	return wasmrec.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}
}

func statusOf(err error) abi.Status {
	var se *wasmrec.StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	if err != nil {
		return 99 // not a host status
	}
	return abi.StatusOK
}

func mustGet(t *testing.T, c *fake.Cluster, apiVersion, kind, ns, name string) *wasmrec.Object {
	t.Helper()
	o, ok := c.Get(apiVersion, kind, ns, name)
	if !ok {
		t.Fatalf("%s %s %s/%s is not in the cluster", apiVersion, kind, ns, name)
	}
	return o
}

// TestStatuses checks each call's status and message against what the host answers.
func TestStatuses(t *testing.T) {
	ctx := context.Background()
	type call func(*fake.Cluster, *wasmrec.Client) error
	stale := func(c *fake.Cluster, cl *wasmrec.Client) error {
		o := mustGet(t, c, "v1", "ConfigMap", "demo", "cm1")
		o.SetNested("2", "data", "k")
		if _, err := cl.Update(ctx, o); err != nil {
			return fmt.Errorf("first update: %w", err)
		}
		o.SetNested("3", "data", "k") // o still holds the old resourceVersion
		_, err := cl.Update(ctx, o)
		return err
	}
	for _, tc := range []struct {
		name string
		// setup adjusts the cluster (grant, namespaces...); nil for none.
		setup func(*fake.Cluster)
		call  call
		want  abi.Status
		msg   string // a part of the message
	}{
		{name: "get", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "ConfigMap", "demo", "cm1")
			return err
		}, want: abi.StatusOK},
		{name: "get missing", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "ConfigMap", "demo", "nope")
			return err
		}, want: abi.StatusNotFound, msg: `configmaps "nope" not found`},
		{name: "get a custom resource missing", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, appV1, "App", "demo", "nope")
			return err
		}, want: abi.StatusNotFound, msg: `apps.demo.wasmrec.dev "nope" not found`},
		{name: "get without a name", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "ConfigMap", "demo", "")
			return err
		}, want: abi.StatusBadRequest, msg: "get needs a name"},
		{name: "get a kind the manifest does not ask to get", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "Secret", "demo", "s")
			return err
		}, want: abi.StatusForbidden, msg: "get Secret.v1 needs get core/secrets, list core/secrets, watch core/secrets: the module's manifest does not ask for get core/secrets"},
		{name: "get in a group the manifest does not name", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "apps/v1", "Deployment", "demo", "d")
			return err
		}, want: abi.StatusForbidden, msg: `forbidden: get Deployment.v1.apps: plugin "app" may get nothing in API group apps`},
		{name: "get a kind the group does not serve", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "Deployment", "demo", "d")
			return err
		}, want: abi.StatusBadRequest, msg: "no resource serves Deployment.v1"},
		{name: "get without apiVersion and kind", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "a/b/c", "", "demo", "d")
			return err
		}, want: abi.StatusBadRequest, msg: "do not name a kind"},
		{name: "get a namespaced kind without a namespace", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "ConfigMap", "", "cm1")
			return err
		}, want: abi.StatusBadRequest, msg: "ConfigMap.v1 is namespaced"},
		{name: "get a cluster-scoped kind with a namespace", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "Namespace", "demo", "demo")
			return err
		}, want: abi.StatusBadRequest, msg: "Namespace.v1 is cluster-scoped"},
		{name: "get a cluster-scoped object", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "Namespace", "", "demo")
			return err
		}, want: abi.StatusOK},
		{name: "get outside the plugin's namespaces", setup: func(c *fake.Cluster) { c.SetNamespaces("other") }, call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "ConfigMap", "demo", "cm1")
			return err
		}, want: abi.StatusForbidden, msg: `namespace "demo" is outside plugin "app"'s namespaces [other]`},
		{name: "get what the operator did not grant", setup: func(c *fake.Cluster) {
			c.SetGrant(perm("", "configmaps", "list", "watch"), perm("", "*", "get"))
		}, call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Get(ctx, "v1", "Secret", "demo", "s")
			return err
		}, want: abi.StatusForbidden, msg: `plugin "app" was not granted list core/secrets, watch core/secrets`},
		{name: "list", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.List(ctx, "v1", "Secret", "", "")
			return err
		}, want: abi.StatusOK},
		{name: "list with a bad selector", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.List(ctx, "v1", "ConfigMap", "demo", "a in (b")
			return err
		}, want: abi.StatusBadRequest, msg: `labelSelector "a in (b"`},
		{name: "list a kind not asked for", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.List(ctx, "v1", "Pod", "demo", "")
			return err
		}, want: abi.StatusForbidden, msg: "list core/pods"},
		{name: "create", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Create(ctx, cm("demo", "new", nil))
			return err
		}, want: abi.StatusOK},
		{name: "create what exists", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Create(ctx, cm("demo", "cm1", nil))
			return err
		}, want: abi.StatusAlreadyExists, msg: `configmaps "cm1" already exists`},
		{name: "create without a name", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Create(ctx, cm("demo", "", nil))
			return err
		}, want: abi.StatusInvalid, msg: "name or generateName is required"},
		{name: "create with a bad name", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Create(ctx, cm("demo", "Bad_Name", nil))
			return err
		}, want: abi.StatusInvalid, msg: `ConfigMap "Bad_Name" is invalid: metadata.name`},
		{name: "create with a bad label", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Create(ctx, cm("demo", "x", map[string]any{"a": "not ok!"}))
			return err
		}, want: abi.StatusInvalid, msg: "metadata.labels"},
		{name: "create with a resourceVersion", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			o := mustGet(t, c, "v1", "ConfigMap", "demo", "cm1")
			o.SetNested("copy", "metadata", "name")
			_, err := cl.Create(ctx, o)
			return err
		}, want: abi.StatusUnavailable, msg: "resourceVersion should not be set"},
		{name: "create a kind the manifest may not create", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Create(ctx, object("v1", "Secret", "demo", "s", nil))
			return err
		}, want: abi.StatusForbidden, msg: "create core/secrets"},
		{name: "create without a namespace", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Create(ctx, cm("", "x", nil))
			return err
		}, want: abi.StatusBadRequest, msg: "is namespaced"},
		{name: "create an App: status is dropped", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			out, err := cl.Create(ctx, app("demo", "new"))
			if err == nil && out.Object["status"] != nil {
				return fmt.Errorf("create kept the status: %v", out.Object["status"])
			}
			return err
		}, want: abi.StatusOK},
		{name: "update", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			o := mustGet(t, c, "v1", "ConfigMap", "demo", "cm1")
			o.SetNested("2", "data", "k")
			_, err := cl.Update(ctx, o)
			return err
		}, want: abi.StatusOK},
		{name: "update with a stale resourceVersion", call: stale, want: abi.StatusConflict, msg: "the object has been modified"},
		{name: "update of another uid", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			o := mustGet(t, c, "v1", "ConfigMap", "demo", "cm1")
			o.SetNested("0000", "metadata", "uid")
			_, err := cl.Update(ctx, o)
			return err
		}, want: abi.StatusConflict, msg: "Precondition failed: UID in precondition: 0000"},
		{name: "update of a missing object", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Update(ctx, cm("demo", "nope", nil))
			return err
		}, want: abi.StatusNotFound},
		{name: "update without a name", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Update(ctx, cm("demo", "", nil))
			return err
		}, want: abi.StatusBadRequest, msg: "update: the object has no metadata.name"},
		{name: "update of a ConfigMap without resourceVersion", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Update(ctx, cm("demo", "cm1", nil))
			return err
		}, want: abi.StatusOK},
		{name: "update of a custom resource without resourceVersion", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Update(ctx, app("demo", "web"))
			return err
		}, want: abi.StatusInvalid, msg: "metadata.resourceVersion: Invalid value: 0: must be specified for an update"},
		{name: "update_status", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			o := mustGet(t, c, appV1, "App", "demo", "web")
			o.SetNested(true, "status", "ready")
			_, err := cl.Status().Update(ctx, o)
			return err
		}, want: abi.StatusOK},
		{name: "update_status without the status rule", setup: func(c *fake.Cluster) {
			m := manifest()
			c.SetGrant(slices.DeleteFunc(m.Permissions, func(p wasmrec.Permission) bool { return p.Resources[0] == "apps/status" })...)
		}, call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Status().Update(ctx, mustGet(t, c, appV1, "App", "demo", "web"))
			return err
		}, want: abi.StatusForbidden, msg: `update App.v1.demo.wasmrec.dev needs update demo.wasmrec.dev/apps/status: plugin "app" was not granted`},
		{name: "update_status of a kind without status", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Status().Update(ctx, mustGet(t, c, "v1", "ConfigMap", "demo", "cm1"))
			return err
		}, want: abi.StatusNotFound, msg: "the server could not find the requested resource"},
		{name: "update_status of a kind not asked for", setup: func(c *fake.Cluster) {
			c.SetGrant(append(manifest().Permissions, perm("", "secrets/status", "update"))...)
		}, call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Status().Update(ctx, object("v1", "Secret", "demo", "s", nil))
			return err
		}, want: abi.StatusForbidden, msg: "the module's manifest does not ask for update core/secrets/status"},
		{name: "patch", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchMerge, map[string]any{"data": map[string]any{"x": "y"}})
			return err
		}, want: abi.StatusOK},
		{name: "patch without a name", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", ""), wasmrec.PatchMerge, map[string]any{})
			return err
		}, want: abi.StatusBadRequest, msg: "patch needs the object's name"},
		{name: "patch of a missing object", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "nope"), wasmrec.PatchMerge, map[string]any{})
			return err
		}, want: abi.StatusNotFound},
		{name: "patch of an unknown type", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), "yaml", map[string]any{})
			return err
		}, want: abi.StatusBadRequest, msg: `patch type "yaml"`},
		{name: "patch of an unknown subresource", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			err := fake.RawCall(ctx, c, abi.ImportPatch, `{"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"cm1","type":"merge","patch":{},"subresource":"scale"}`)
			return err
		}, want: abi.StatusBadRequest, msg: `subresource "scale"`},
		{name: "strategic patch of a custom resource", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref(appV1, "App", "demo", "web"), wasmrec.PatchStrategic, map[string]any{"spec": map[string]any{"port": 1}})
			return err
		}, want: abi.StatusBadRequest, msg: "unknown format"},
		{name: "merge patch that is not an object", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchMerge, []any{1})
			return err
		}, want: abi.StatusBadRequest},
		{name: "json patch that is not an array", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchJSON, map[string]any{"op": "add"})
			return err
		}, want: abi.StatusBadRequest},
		{name: "json patch whose test fails", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchJSON, `[{"op":"test","path":"/data/k","value":"other"}]`)
			return err
		}, want: abi.StatusBadRequest}, // a string is not a JSON patch
		{name: "json patch whose test fails (raw)", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchJSON, []byte(`[{"op":"test","path":"/data/k","value":"other"}]`))
			return err
		}, want: abi.StatusInvalid, msg: "test failed"},
		{name: "json patch of a missing path", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchJSON, []byte(`[{"op":"replace","path":"/spec/x","value":1}]`))
			return err
		}, want: abi.StatusInvalid},
		{name: "merge patch with a stale resourceVersion", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchMerge, map[string]any{"metadata": map[string]any{"resourceVersion": "1"}})
			return err
		}, want: abi.StatusConflict},
		{name: "merge patch renaming the object", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchMerge, map[string]any{"metadata": map[string]any{"name": "other"}})
			return err
		}, want: abi.StatusBadRequest, msg: "does not match the name on the URL"},
		{name: "status patch without the status rule", setup: func(c *fake.Cluster) {
			c.SetGrant(slices.DeleteFunc(manifest().Permissions, func(p wasmrec.Permission) bool { return p.Resources[0] == "apps/status" })...)
		}, call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Status().Patch(ctx, ref(appV1, "App", "demo", "web"), wasmrec.PatchMerge, map[string]any{"status": map[string]any{"ready": true}})
			return err
		}, want: abi.StatusForbidden, msg: "patch demo.wasmrec.dev/apps/status"},
		{name: "status patch of a kind without status", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Status().Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchMerge, map[string]any{})
			return err
		}, want: abi.StatusNotFound, msg: "the server could not find the requested resource"},
		{name: "status apply of a missing object", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Status().Apply(ctx, app("demo", "nope"), true)
			return err
		}, want: abi.StatusNotFound},
		{name: "apply of another kind", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			_, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.PatchApply, app("demo", "cm1").Object)
			return err
		}, want: abi.StatusBadRequest},
		{name: "delete", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.Delete(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.DeleteOptions{})
		}, want: abi.StatusOK},
		{name: "delete without a name", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.Delete(ctx, ref("v1", "ConfigMap", "demo", ""), wasmrec.DeleteOptions{})
		}, want: abi.StatusBadRequest, msg: "a plugin deletes one object at a time"},
		{name: "delete of a missing object", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.Delete(ctx, ref("v1", "ConfigMap", "demo", "nope"), wasmrec.DeleteOptions{})
		}, want: abi.StatusNotFound, msg: `configmaps "nope" not found`},
		{name: "delete of another uid", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.Delete(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.DeleteOptions{UID: "0000"})
		}, want: abi.StatusConflict, msg: "the UID in the precondition (0000) does not match the UID in record"},
		{name: "delete with its uid", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.Delete(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.DeleteOptions{UID: mustGet(t, c, "v1", "ConfigMap", "demo", "cm1").UID(), PropagationPolicy: "Foreground"})
		}, want: abi.StatusOK},
		{name: "delete with an unknown propagation policy", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.Delete(ctx, ref("v1", "ConfigMap", "demo", "cm1"), wasmrec.DeleteOptions{PropagationPolicy: "Later"})
		}, want: abi.StatusInvalid, msg: `Unsupported value: "Later"`},
		{name: "delete a kind the manifest may not delete", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.Delete(ctx, ref("v1", "Secret", "demo", "s"), wasmrec.DeleteOptions{})
		}, want: abi.StatusForbidden, msg: "delete core/secrets"},
		{name: "event about an object", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.EventFor(ctx, ref("v1", "ConfigMap", "demo", "cm1"), "Normal", "Seen", "")
		}, want: abi.StatusOK},
		{name: "event outside a reconcile, about nothing", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.Event(ctx, "Normal", "Seen", "")
		}, want: abi.StatusBadRequest, msg: "an event's object needs apiVersion, kind and name"},
		{name: "event of an unknown type", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.EventFor(ctx, ref("v1", "ConfigMap", "demo", "cm1"), "Info", "Seen", "")
		}, want: abi.StatusBadRequest, msg: `event type "Info"`},
		{name: "event without a reason", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.EventFor(ctx, ref("v1", "ConfigMap", "demo", "cm1"), "Normal", "", "")
		}, want: abi.StatusBadRequest, msg: "an event needs a reason"},
		{name: "event without the events rule", setup: func(c *fake.Cluster) {
			c.SetGrant(slices.DeleteFunc(manifest().Permissions, func(p wasmrec.Permission) bool { return p.Resources[0] == "events" })...)
		}, call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			return cl.EventFor(ctx, ref("v1", "ConfigMap", "demo", "cm1"), "Normal", "Seen", "")
		}, want: abi.StatusForbidden, msg: "an event needs create core/events"},
		{name: "event about a cluster-scoped object, default outside the namespaces", setup: func(c *fake.Cluster) { c.SetNamespaces("demo") },
			call: func(c *fake.Cluster, cl *wasmrec.Client) error {
				return cl.EventFor(ctx, ref("v1", "Namespace", "", "demo"), "Normal", "Seen", "")
			}, want: abi.StatusForbidden, msg: `recorded in namespace "default"`},
		{name: "a call with a done context", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := cl.Get(ctx, "v1", "ConfigMap", "demo", "cm1")
			return err
		}, want: abi.StatusTimeout},
		{name: "a request that is not JSON", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			err := fake.RawCall(ctx, c, abi.ImportDelete, `{"name":`)
			return err
		}, want: abi.StatusBadRequest, msg: "not valid JSON"},
		{name: "an unknown call", call: func(c *fake.Cluster, cl *wasmrec.Client) error {
			err := fake.RawCall(ctx, c, "watch", `{}`)
			return err
		}, want: abi.StatusBadRequest, msg: `unknown host function "watch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewCluster(manifest(), app("demo", "web"), cm("demo", "cm1", nil), object("v1", "Namespace", "", "demo", nil))
			if tc.setup != nil {
				tc.setup(c)
			}
			err := tc.call(c, c.Client())
			if got := statusOf(err); got != tc.want {
				t.Fatalf("status %v (%v), want %v", got, err, tc.want)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q does not say %q", err.Error(), tc.msg)
			}
		})
	}
}

// IgnoreNotFound lets a missing object's error go, and no other.
func TestIgnoreNotFound(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster(manifest(), object("v1", "ConfigMap", "demo", "cm1", nil))
	cl := c.Client()
	_, err := cl.Get(ctx, "v1", "ConfigMap", "demo", "nope")
	if err == nil || wasmrec.IgnoreNotFound(err) != nil {
		t.Errorf("a missing object: %v, then %v; want an error, then nil", err, wasmrec.IgnoreNotFound(err))
	}
	_, err = cl.Get(ctx, "v1", "Secret", "demo", "s") // outside the manifest's permissions
	if err == nil || wasmrec.IgnoreNotFound(err) != err {
		t.Errorf("a forbidden read: IgnoreNotFound(%v) = %v; want it kept", err, wasmrec.IgnoreNotFound(err))
	}
	if wasmrec.IgnoreNotFound(nil) != nil {
		t.Error("IgnoreNotFound(nil) is not nil")
	}
}

// Map runs a map function as the host does: it reads, and every write is refused; after it the
// client writes again.
func TestMapRefusesWrites(t *testing.T) {
	c := fake.NewCluster(manifest(), app("demo", "a"), cm("demo", "settings", nil))
	cl := c.Client()
	ctx := context.Background()
	var writeErr error
	reqs := c.Map(func() []wasmrec.Request {
		apps, err := cl.List(ctx, appV1, "App", "demo", "")
		if err != nil {
			t.Fatal(err)
		}
		_, writeErr = cl.Create(ctx, cm("demo", "made-in-a-map", nil))
		wasmrec.Log.Info("mapped", "apps", len(apps))
		return []wasmrec.Request{wasmrec.NewRequest("demo", apps[0].Name())}
	})
	if len(reqs) != 1 || reqs[0].Name != "a" {
		t.Fatalf("Map returned %+v", reqs)
	}
	if statusOf(writeErr) != abi.StatusBadRequest || !strings.Contains(writeErr.Error(), "a map function may only read") {
		t.Fatalf("a create in a map: %v, want bad request", writeErr)
	}
	if _, ok := c.Get("v1", "ConfigMap", "demo", "made-in-a-map"); ok {
		t.Fatal("the map's create reached the cluster")
	}
	if logs := c.Logs(); len(logs) != 1 || logs[0].Message != "mapped" {
		t.Fatalf("logs %+v", logs)
	}
	if _, err := cl.Create(ctx, cm("demo", "after", nil)); err != nil {
		t.Fatalf("a create after the map: %v", err)
	}
}

// BeforeCall runs before each call, outside the cluster's lock: it may write to the cluster,
// and the call then sees the write, as a plugin sees another writer's between its read and its
// patch.
func TestBeforeCallRunsBeforeEachCall(t *testing.T) {
	ctx := context.Background()
	c := fake.NewCluster(manifest(), cm("demo", "cm", nil))
	var calls []string
	c.BeforeCall(func(call string, req []byte) {
		calls = append(calls, call)
		if call == abi.ImportPatch && len(calls) == 2 { // another writer, after the plugin's read
			o, _ := c.Get("v1", "ConfigMap", "demo", "cm")
			o.Object["data"].(map[string]any)["other"] = "theirs"
			c.Put(o)
		}
	})
	cl := c.Client()
	if _, err := cl.Get(ctx, "v1", "ConfigMap", "demo", "cm"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Patch(ctx, ref("v1", "ConfigMap", "demo", "cm"), wasmrec.PatchMerge, map[string]any{"data": map[string]any{"mine": "1"}}); err != nil {
		t.Fatal(err)
	}
	stored, _ := c.Get("v1", "ConfigMap", "demo", "cm")
	if d := stored.Object["data"].(map[string]any); d["other"] != "theirs" || d["mine"] != "1" || d["k"] != "v" {
		t.Fatalf("data after the other writer and the patch: %v", d)
	}
	if !slices.Equal(calls, []string{abi.ImportGet, abi.ImportPatch}) {
		t.Fatalf("BeforeCall saw %v", calls)
	}
	c.BeforeCall(nil)
	if _, err := cl.Get(ctx, "v1", "ConfigMap", "demo", "cm"); err != nil || len(calls) != 2 {
		t.Fatalf("after BeforeCall(nil): %v, %d calls seen", err, len(calls))
	}
}
