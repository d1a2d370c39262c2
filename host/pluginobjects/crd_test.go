package pluginobjects_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

// The CRDs' specs hold every setting of plugin.Config but name (the object's) and
// interruptible (the operator's alone), and nothing else but paused and each kind's own
// fields; nothing of the spec keeps unknown fields.
func TestCRDsHoldEveryConfigSetting(t *testing.T) {
	crds, err := crd.Parse(pluginobjects.CRD)
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 2 || crds[0].Name != "plugins.wasmrec.dev" || crds[0].Spec.Scope != apiextensionsv1.NamespaceScoped ||
		crds[1].Name != "clusterplugins.wasmrec.dev" || crds[1].Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Fatalf("plugins.crd.yaml holds %d CRDs, want plugins.wasmrec.dev (namespaced) then clusterplugins.wasmrec.dev (cluster-scoped)", len(crds))
	}
	want := map[string][]string{}
	var fields func(prefix string, t reflect.Type)
	fields = func(prefix string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ.PkgPath() == "k8s.io/apimachinery/pkg/api/resource" || typ.Name() == "Duration" {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || (prefix == "" && (name == "name" || name == "interruptible" || name == "namespaces")) {
				continue
			}
			want[prefix] = append(want[prefix], name)
			fields(prefix+"."+name, f.Type)
		}
	}
	fields("", reflect.TypeFor[plugin.Config]())
	own := map[string][]string{"plugins.wasmrec.dev": {"paused", "serviceAccountName"}, "clusterplugins.wasmrec.dev": {"paused", "serviceAccount", "namespaces"}}
	for _, c := range crds {
		specSchema := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		got := map[string][]string{}
		var walk func(prefix string, s apiextensionsv1.JSONSchemaProps)
		walk = func(prefix string, s apiextensionsv1.JSONSchemaProps) {
			if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
				t.Errorf("%s: spec%s keeps unknown fields", c.Name, prefix)
			}
			if s.Items != nil && s.Items.Schema != nil {
				walk(prefix, *s.Items.Schema)
			}
			for name, p := range s.Properties {
				got[prefix] = append(got[prefix], name)
				if prefix == "" && slices.Contains(own[c.Name], name) {
					continue
				}
				walk(prefix+"."+name, p)
			}
		}
		walk("", specSchema)
		w := map[string][]string{}
		for k, v := range want {
			w[k] = slices.Clone(v)
		}
		w[""] = append(w[""], own[c.Name]...)
		for k := range got {
			slices.Sort(got[k])
			slices.Sort(w[k])
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: spec fields\n%v\nwant\n%v", c.Name, got, w)
		}
	}
}
