package scaffold

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/internal/plugintest"
	"github.com/wasmrec/wasmrec/internal/release"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestWriteGo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hello")
	files, err := Write(Options{Name: "hello", Lang: "go", For: "apps/v1/Deployment", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "go.mod", "host.yaml", "main.go", "main_test.go", "samples/hello.yaml", "tests/hello.yaml"}
	if !slices.Equal(files, want) {
		t.Errorf("files = %v, want %v", files, want)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !strings.Contains(string(gomod), "require github.com/wasmrec/wasmrec/sdk/go "+release.Version) {
		t.Errorf("go.mod does not require the SDK release:\n%s", gomod)
	}
	// The grant is a host config the host accepts, and it grants what the manifest asks for.
	hc, err := plugin.LoadHostConfig(filepath.Join(dir, "host.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := hc.Plugins[0]
	if p.Name != "hello" || p.Module != filepath.Join(dir, "hello.wasm") || !slices.Equal(p.Namespaces, []string{"default"}) {
		t.Errorf("host.yaml's plugin = %+v", p)
	}
	if len(p.Permissions) != 2 || p.Permissions[0].Group != "apps" || !slices.Equal(p.Permissions[0].Resources, []string{"deployments"}) {
		t.Errorf("host.yaml grants %+v", p.Permissions)
	}
	if _, err := plugintest.ReadFile(filepath.Join(dir, "tests", "hello.yaml")); err != nil {
		t.Error(err)
	}
	main, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	if !strings.Contains(string(main), `{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}}`) {
		t.Errorf("main.go's manifest does not ask for what host.yaml grants:\n%s", main)
	}
	// A built-in kind is read typed, with the generated type of this tree's sdk/go/k8s.
	if !strings.Contains(string(main), `appsv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/apps/v1"`) || !strings.Contains(string(main), "var obj appsv1.Deployment") {
		t.Errorf("main.go does not read a typed appsv1.Deployment:\n%s", main)
	}
}

// Every kind wasmrec new writes a typed plugin for has its type in this tree's sdk/go/k8s.
func TestTypedKindsExist(t *testing.T) {
	for key, tk := range typedKinds {
		kind := key[strings.LastIndex(key, "/")+1:]
		dir := filepath.Join("..", "..", "sdk", "go", strings.TrimPrefix(tk.Import, "github.com/wasmrec/wasmrec/sdk/go/"))
		src, err := os.ReadFile(filepath.Join(dir, "zz_generated.types.go"))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !strings.Contains(string(src), "\ntype "+kind+" struct {") {
			t.Errorf("%s: %s has no type %s", key, dir, kind)
		}
	}
}

// A custom resource's plugin is typed too: wasmrec new writes the Go types of the CRD it
// writes, with kubebuilder's markers, and main.go reads them.
func TestWriteGoCustomResourceIsTyped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "widget")
	files, err := Write(Options{Name: "widget", Lang: "go", For: "my-group.example.com/v1alpha1/Widget", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"api/v1alpha1/groupversion.go", "api/v1alpha1/widget_types.go"} {
		if !slices.Contains(files, f) {
			t.Errorf("files %v lack %s", files, f)
		}
	}
	main, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	for _, name := range []string{"main.go", "main_test.go", "api/v1alpha1/groupversion.go", "api/v1alpha1/widget_types.go"} {
		src, _ := os.ReadFile(filepath.Join(dir, name))
		if formatted, err := format.Source(src); err != nil || !bytes.Equal(formatted, src) {
			t.Errorf("%s is not as gofmt writes it (%v):\n%s", name, err, src)
		}
	}
	for _, want := range []string{`mygroupv1alpha1 "widget/api/v1alpha1"`, "var obj mygroupv1alpha1.Widget"} {
		if !strings.Contains(string(main), want) {
			t.Errorf("main.go of a custom resource lacks %q:\n%s", want, main)
		}
	}
	gv, _ := os.ReadFile(filepath.Join(dir, "api/v1alpha1/groupversion.go"))
	types, _ := os.ReadFile(filepath.Join(dir, "api/v1alpha1/widget_types.go"))
	for _, want := range []string{"// +groupName=my-group.example.com\npackage v1alpha1\n", "// +kubebuilder:object:generate=true\n"} {
		if !strings.Contains(string(gv), want) {
			t.Errorf("groupversion.go lacks %q:\n%s", want, gv)
		}
	}
	for _, want := range []string{"// +kubebuilder:object:root=true\n", "type Widget struct {", "type WidgetList struct {", "Items           []Widget `json:\"items\"`"} {
		if !strings.Contains(string(types), want) {
			t.Errorf("widget_types.go lacks %q:\n%s", want, types)
		}
	}
}

func TestWriteC(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nodes")
	files, err := Write(Options{Name: "nodes", Lang: "c", For: "v1/Node", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "nodes.c") || slices.Contains(files, "go.mod") {
		t.Errorf("files = %v", files)
	}
	hc, err := plugin.LoadHostConfig(filepath.Join(dir, "host.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if ns := hc.Plugins[0].Namespaces; len(ns) != 0 {
		t.Errorf("a cluster-scoped kind's plugin is limited to namespaces %v", ns)
	}
	sample, _ := os.ReadFile(filepath.Join(dir, "samples", "nodes.yaml"))
	if strings.Contains(string(sample), "namespace:") {
		t.Errorf("the sample of a cluster-scoped kind has a namespace:\n%s", sample)
	}
	// The test cases read as wasmrec test reads them (e2e runs them), with no namespace for a
	// cluster-scoped kind.
	cases, err := plugintest.ReadFile(filepath.Join(dir, "tests", "nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases.Cases) != 3 || cases.Cases[0].Request.Namespace != "" || cases.Cases[0].Request.Name != "nodes-sample" {
		t.Errorf("tests/nodes.yaml: %+v", cases.Cases)
	}
	c, _ := os.ReadFile(filepath.Join(dir, "nodes.c"))
	for _, want := range []string{`wasmrec_event(`, `"reason\":\"Marked\"`, `if (done) return`} {
		if !strings.Contains(string(c), want) {
			t.Errorf("nodes.c lacks %s:\n%s", want, c)
		}
	}
}

func TestWriteRefuses(t *testing.T) {
	taken := t.TempDir()
	if err := os.WriteFile(filepath.Join(taken, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Name: "Hello", Lang: "go", For: "v1/ConfigMap"}, `plugin name "Hello": use lowercase letters`},
		{Options{Name: "hello", Lang: "rust", For: "v1/ConfigMap"}, `--lang "rust": use go or c`},
		{Options{Name: "hello", Lang: "go", For: "v1/Confgmap"}, "did you mean ConfigMap?"},
		{Options{Name: "hello", Lang: "go", For: "v1/ConfigMap", Dir: taken}, "exists and is not empty"},
		{Options{Name: "plugin", Lang: "go", For: "v1/Secret", Dir: t.TempDir()}, `module path "plugin" is also a package of Go's standard library`},
	} {
		if _, err := Write(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Write(%+v) = %v, want %q", tc.o, err, tc.want)
		}
	}
}

// stdPackages are the one-word packages of the standard library of the Go that runs the tests.
func TestStdPackagesAreGoListStd(t *testing.T) {
	out, err := exec.Command("go", "list", "std").Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	var want []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.Contains(p, "/") {
			want = append(want, p)
		}
	}
	if !slices.Equal(stdPackages, want) {
		t.Errorf("stdPackages = %q\ngo list std has %q", stdPackages, want)
	}
}

// host.yaml names the module wasmrec build writes, the folder's name, whatever the plugin's.
func TestHostYAMLNamesTheBuiltModule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "otherdir")
	if _, err := Write(Options{Name: "named", Lang: "c", For: "v1/ConfigMap", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "host.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "    module: otherdir.wasm\n") || !strings.Contains(string(b), "  - name: named\n") {
		t.Errorf("host.yaml:\n%s\nwant the plugin named named, its module otherdir.wasm", b)
	}
}

// A plugin for a custom resource gets a CRD for it, one the API server accepts as it is (the
// e2e TestFailuresInTheAuthorsWords installs one).
func TestCustomResourceGetsACRD(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "widget")
	files, err := Write(Options{Name: "widget", Lang: "go", For: "example.com/v1/Widget", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "crds/widgets.example.com.yaml") {
		t.Fatalf("files %q lack crds/widgets.example.com.yaml", files)
	}
	b, err := os.ReadFile(filepath.Join(dir, "crds", "widgets.example.com.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: widgets.example.com\n", "group: example.com\n", "scope: Namespaced\n", "kind: Widget\n", "plural: widgets\n", "singular: widget\n", "- name: v1\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the CRD lacks %q:\n%s", want, b)
		}
	}
	if _, err := Write(Options{Name: "cms", Lang: "go", For: "v1/ConfigMap", Dir: filepath.Join(t.TempDir(), "cms")}); err != nil {
		t.Fatal(err)
	}
}

// The samples of the workload kinds hold what the API server requires of them, in fields
// k8s.io/api has (a strict decode refuses any other).
func TestSamplesOfBuiltInKindsDecodeStrictly(t *testing.T) {
	types := map[string]any{
		"apps/v1/Deployment": &appsv1.Deployment{}, "apps/v1/ReplicaSet": &appsv1.ReplicaSet{},
		"apps/v1/StatefulSet": &appsv1.StatefulSet{}, "apps/v1/DaemonSet": &appsv1.DaemonSet{},
		"batch/v1/Job": &batchv1.Job{}, "batch/v1/CronJob": &batchv1.CronJob{},
		"v1/Pod": &corev1.Pod{}, "v1/Service": &corev1.Service{},
	}
	if len(types) != len(sampleBodies) {
		t.Fatalf("%d kinds here, %d with sample bodies", len(types), len(sampleBodies))
	}
	for key, obj := range types {
		dir := filepath.Join(t.TempDir(), "s")
		if _, err := Write(Options{Name: "s", Lang: "c", For: key, Dir: dir}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "samples", "s.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Errorf("%s: %v\n%s", key, err, b)
			continue
		}
		var containers []corev1.Container
		switch o := obj.(type) {
		case *appsv1.Deployment:
			containers = o.Spec.Template.Spec.Containers
			if o.Spec.Selector == nil || o.Spec.Template.Labels["app"] != o.Spec.Selector.MatchLabels["app"] {
				t.Errorf("%s: its selector does not select its template", key)
			}
		case *batchv1.CronJob:
			containers = o.Spec.JobTemplate.Spec.Template.Spec.Containers
			if o.Spec.Schedule == "" || o.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("%s: no schedule or restartPolicy", key)
			}
		case *batchv1.Job:
			containers = o.Spec.Template.Spec.Containers
		case *corev1.Pod:
			containers = o.Spec.Containers
		case *corev1.Service:
			if len(o.Spec.Ports) == 0 {
				t.Errorf("%s: no ports", key)
			}
			continue
		default:
			continue
		}
		if len(containers) != 1 || containers[0].Image == "" {
			t.Errorf("%s: containers %v", key, containers)
		}
	}
}
