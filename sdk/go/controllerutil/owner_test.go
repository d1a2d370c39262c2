package controllerutil_test

import (
	"errors"
	"testing"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/controllerutil"
)

const (
	appRef   = `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","name":"web","uid":"u-web"}`
	ctrlRef  = `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","name":"web","uid":"u-web","controller":true,"blockOwnerDeletion":true}`
	otherRef = `{"apiVersion":"v1","kind":"ConfigMap","name":"other","uid":"u-other"}`
)

func app(t *testing.T) *wasmrec.Object {
	return obj(t, `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","metadata":{"namespace":"demo","name":"web","uid":"u-web"}}`)
}

func child(t *testing.T, refs string) *wasmrec.Object {
	md := `{"namespace":"demo","name":"web-config"}`
	if refs != "" {
		md = `{"namespace":"demo","name":"web-config","ownerReferences":` + refs + `}`
	}
	return obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":`+md+`}`)
}

func TestSetControllerReference(t *testing.T) {
	for _, tc := range []struct {
		name, refs, want string
	}{
		{"an object with no owners gets a controller reference", "", `[` + ctrlRef + `]`},
		{"other owners are kept, the reference appended", `[` + otherRef + `]`, `[` + otherRef + `,` + ctrlRef + `]`},
		{"a controller reference to the owner already there is kept, not doubled", `[` + ctrlRef + `]`, `[` + ctrlRef + `]`},
		{"a plain reference to the owner becomes the controller reference, in its place",
			`[` + appRef + `,` + otherRef + `]`, `[` + ctrlRef + `,` + otherRef + `]`},
		{"a reference to the owner at another version of its group is replaced",
			`[{"apiVersion":"demo.wasmrec.dev/v1beta1","kind":"App","name":"web","uid":"u-old","controller":true}]`, `[` + ctrlRef + `]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := child(t, tc.refs)
			if err := controllerutil.SetControllerReference(app(t), o); err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "ownerReferences", jsonOf(t, o, "metadata", "ownerReferences"), tc.want)
		})
	}
}

func TestSetControllerReferenceRefusesAnotherController(t *testing.T) {
	for _, tc := range []struct{ name, controller, want string }{
		{"another object of the kind", `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","name":"api","uid":"u-api","controller":true}`,
			"ConfigMap demo/web-config is already owned by another App controller api"},
		{"the same name, another kind", `{"apiVersion":"demo.wasmrec.dev/v1","kind":"Site","name":"web","uid":"u-site","controller":true}`,
			"ConfigMap demo/web-config is already owned by another Site controller web"},
		{"the same kind and name, another group", `{"apiVersion":"other.example/v1","kind":"App","name":"web","uid":"u-x","controller":true}`,
			"ConfigMap demo/web-config is already owned by another App controller web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := child(t, `[`+tc.controller+`]`)
			err := controllerutil.SetControllerReference(app(t), o)
			var owned *controllerutil.AlreadyOwnedError
			if !errors.As(err, &owned) {
				t.Fatalf("err = %v, want an AlreadyOwnedError", err)
			}
			if err.Error() != tc.want {
				t.Errorf("err = %q, want %q", err, tc.want)
			}
			if owned.Object != o.Ref() {
				t.Errorf("err.Object = %+v, want %+v", owned.Object, o.Ref())
			}
			sameJSON(t, "ownerReferences, unchanged", jsonOf(t, o, "metadata", "ownerReferences"), `[`+tc.controller+`]`)
		})
	}
}

// The references the garbage collector would ignore, and one the API server refuses, are
// refused; the object is left as it was.
func TestOwnerReferencesRefused(t *testing.T) {
	namespaced := func(ns string) *wasmrec.Object {
		return obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"`+ns+`","name":"x","uid":"u-x"}}`)
	}
	clusterRole := obj(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"reader","uid":"u-r"}}`)
	for _, tc := range []struct {
		name          string
		owner, object *wasmrec.Object
		want          string
	}{
		{"a namespaced owner of a cluster-scoped object", namespaced("demo"), clusterRole,
			"cluster-scoped ClusterRole reader must not have a namespace-scoped owner, owner's namespace demo"},
		{"an owner in another namespace", namespaced("other"), child(t, ""),
			"cross-namespace owner references are disallowed, owner's namespace other, ConfigMap demo/web-config's namespace demo"},
		{"an owner without a uid", wasmrec.NewObject("demo.wasmrec.dev/v1", "App", "demo", "web"), child(t, ""),
			"owner App demo/web of ConfigMap demo/web-config has no metadata.uid: use the owner as read from the cluster"},
		{"an owner without a kind", obj(t, `{"apiVersion":"v1","metadata":{"namespace":"demo","name":"x","uid":"u"}}`), child(t, ""),
			`owner of ConfigMap demo/web-config needs apiVersion, kind and metadata.name (it has "v1", "", "x")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for fn, set := range map[string]func(owner, object *wasmrec.Object) error{
				"SetControllerReference": controllerutil.SetControllerReference,
				"SetOwnerReference":      controllerutil.SetOwnerReference,
			} {
				before := jsonOf(t, tc.object, "metadata")
				err := set(tc.owner, tc.object)
				if err == nil || err.Error() != tc.want {
					t.Errorf("%s: err = %v, want %q", fn, err, tc.want)
				}
				if after := jsonOf(t, tc.object, "metadata"); after != before {
					t.Errorf("%s changed metadata from %s to %s", fn, before, after)
				}
			}
		})
	}

	// Allowed: a cluster-scoped owner, of a namespaced or a cluster-scoped object.
	for _, o := range []*wasmrec.Object{child(t, ""), obj(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}}`)} {
		if err := controllerutil.SetControllerReference(clusterRole, o); err != nil {
			t.Errorf("%s owned by a ClusterRole: %v", o.Kind(), err)
		}
	}
}

func TestSetOwnerReference(t *testing.T) {
	for _, tc := range []struct{ name, refs, want string }{
		{"a plain reference is added", "", `[` + appRef + `]`},
		{"next to another controller, without refusing", `[` + otherRef + `]`, `[` + otherRef + `,` + appRef + `]`},
		{"a reference to the same owner is replaced, a controller one included (as controller-runtime does)", `[` + ctrlRef + `]`, `[` + appRef + `]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := child(t, tc.refs)
			if err := controllerutil.SetOwnerReference(app(t), o); err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "ownerReferences", jsonOf(t, o, "metadata", "ownerReferences"), tc.want)
		})
	}
	// Owned by another controller: the plain reference is added beside it.
	o := child(t, `[{"apiVersion":"v1","kind":"ConfigMap","name":"other","uid":"u-other","controller":true}]`)
	if err := controllerutil.SetOwnerReference(app(t), o); err != nil {
		t.Fatal(err)
	}
	if got := controllerutil.GetControllerOf(o); got == nil || got.Name != "other" {
		t.Errorf("controller = %+v, want other's", got)
	}
}

func TestRemoveOwnerReference(t *testing.T) {
	o := child(t, `[`+otherRef+`,`+ctrlRef+`]`)
	if err := controllerutil.RemoveOwnerReference(app(t), o); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "ownerReferences", jsonOf(t, o, "metadata", "ownerReferences"), `[`+otherRef+`]`)

	err := controllerutil.RemoveOwnerReference(app(t), o)
	if want := "ConfigMap demo/web-config has no owner reference to App web"; err == nil || err.Error() != want {
		t.Errorf("second remove: err = %v, want %q", err, want)
	}

	other := obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"demo","name":"other","uid":"u-other"}}`)
	if err := controllerutil.RemoveOwnerReference(other, o); err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, o, "metadata", "ownerReferences"); got != "absent" {
		t.Errorf("after removing the last owner, ownerReferences = %s, want it gone", got)
	}
	if err := controllerutil.RemoveOwnerReference(other, o); err == nil {
		t.Error("removing from an object with no owners: no error")
	}
}

func TestGetControllerOfAndIsControlledBy(t *testing.T) {
	if got := controllerutil.GetControllerOf(child(t, "")); got != nil {
		t.Errorf("no owners: controller = %+v", got)
	}
	if got := controllerutil.GetControllerOf(child(t, `[`+appRef+`]`)); got != nil {
		t.Errorf("a plain owner: controller = %+v", got)
	}
	o := child(t, `[`+otherRef+`,`+ctrlRef+`]`)
	want := controllerutil.OwnerReference{APIVersion: "demo.wasmrec.dev/v1", Kind: "App", Name: "web", UID: "u-web", Controller: true, BlockOwnerDeletion: true}
	if got := controllerutil.GetControllerOf(o); got == nil || *got != want {
		t.Errorf("controller = %+v, want %+v", got, want)
	}
	if !controllerutil.IsControlledBy(o, app(t)) {
		t.Error("IsControlledBy(owner) = false")
	}
	// An owner of the same name made again is another object: another uid.
	again := obj(t, `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","metadata":{"namespace":"demo","name":"web","uid":"u-web-2"}}`)
	if controllerutil.IsControlledBy(o, again) {
		t.Error("IsControlledBy(an owner of the same name and another uid) = true")
	}
	if controllerutil.IsControlledBy(child(t, `[`+appRef+`]`), app(t)) {
		t.Error("IsControlledBy(a plain owner) = true")
	}
	if controllerutil.IsControlledBy(child(t, `[{"kind":"App","name":"web","uid":"","controller":true}]`), wasmrec.NewObject("demo.wasmrec.dev/v1", "App", "demo", "web")) {
		t.Error("IsControlledBy with no uids = true")
	}
}
