package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/internal/plugintest"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
    - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`

// A kind of a group the folder's CRDs define, which they do not serve, is named with what was
// meant; kinds of other groups are not the folder's business.
func TestCheckFolderKinds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "widget")
	if err := os.MkdirAll(filepath.Join(dir, "crds"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "crds", "widget.yaml"), []byte(widgetCRD), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		apiVersion, kind, want string
	}{
		{"example.com/v1", "Widget", ""},
		{"example.com/v1", "Widgt", `widget/crds/*.yaml do not define: did you mean Widget?`},
		{"example.com/v2", "Widget", `widget/crds/*.yaml serve Widget at v1 only`},
		{"example.com/v1", "Sprocket", `widget/crds/*.yaml do not define (they define Widget of example.com)`},
		{"other.example.com/v1", "Gadget", ""},
		{"v1", "ConfigMap", ""},
	} {
		m := &abi.Manifest{Name: "w", For: abi.Watch{APIVersion: "v1", Kind: "ConfigMap"}, Watches: []abi.Watch{{APIVersion: tc.apiVersion, Kind: tc.kind}}}
		err := checkFolderKinds(dir, m)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v", tc.apiVersion, tc.kind, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: %v, want %q", tc.apiVersion, tc.kind, err, tc.want)
		}
	}
	if err := checkFolderKinds(t.TempDir(), &abi.Manifest{For: abi.Watch{APIVersion: "example.com/v1", Kind: "Widgt"}}); err != nil {
		t.Errorf("a folder without crds/: %v", err)
	}
}

// wasmrec build warns, without failing, when DIR/host.yaml grants less than the manifest asks.
func TestBuildWarnsOfANarrowerGrant(t *testing.T) {
	dir := t.TempDir()
	m := &abi.Manifest{Name: "app", For: abi.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Permissions: []abi.Permission{{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "patch"}}}}
	var out strings.Builder
	warn := func() { // as wasmrec build reads DIR/host.yaml
		t.Helper()
		var o plugintest.Options
		from, err := readGrant(dir, "", &o)
		if err != nil {
			t.Fatal(err)
		}
		warnGrant(&out, from, o.Grant, m)
	}
	warn()
	if out.Len() != 0 {
		t.Errorf("a folder without host.yaml: %q", out.String())
	}
	grant := func(verbs string) {
		t.Helper()
		hc := "plugins:\n  - name: app\n    module: app.wasm\n    permissions:\n      - {group: \"\", resources: [configmaps], verbs: [" + verbs + "]}\n"
		if err := os.WriteFile(filepath.Join(dir, "host.yaml"), []byte(hc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	grant("get, list, watch, patch")
	warn()
	if out.Len() != 0 {
		t.Errorf("a grant of all that is asked: %q", out.String())
	}
	grant("get, list, watch")
	warn()
	if got := out.String(); !strings.Contains(got, "warning: app: the module asks for permissions it was not granted: patch core/configmaps") || !strings.Contains(got, "host.yaml") {
		t.Errorf("a narrower grant: %q", got)
	}
}

// A plugin folder's module is the file its host.yaml names, which a copied folder keeps; without
// one (or with a registry module, or several plugins), it is DIR/<folder name>.wasm.
func TestFolderModuleIsTheOneHostYAMLNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "copy-of-hello")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ hostYAML, want string }{
		{"", filepath.Join(dir, "copy-of-hello.wasm")},
		{"plugins:\n  - name: hello\n    module: hello.wasm\n", filepath.Join(dir, "hello.wasm")},
		{"plugins:\n  - name: hello\n    module: ../out/hello.wasm\n", filepath.Join(filepath.Dir(dir), "out", "hello.wasm")},
		{"plugins:\n  - name: hello\n    module: oci:registry.example/hello:v1\n", filepath.Join(dir, "copy-of-hello.wasm")},
		{"plugins:\n  - {name: a, module: a.wasm}\n  - {name: b, module: b.wasm}\n", filepath.Join(dir, "copy-of-hello.wasm")},
	} {
		os.Remove(filepath.Join(dir, "host.yaml"))
		if tc.hostYAML != "" {
			if err := os.WriteFile(filepath.Join(dir, "host.yaml"), []byte(tc.hostYAML), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := folderModule(dir); err != nil || got != tc.want {
			t.Errorf("host.yaml %q: %q, %v; want %q", tc.hostYAML, got, err, tc.want)
		}
	}
}
