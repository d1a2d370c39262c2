package crdgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// env runs go outside this tree's workspace and offline.
var env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")

func run(t *testing.T, dir string, extra []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, append(slices.Clone(env), extra...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestGeneratedTypesRoundTrip generates a package of API types that does not compile before,
// then builds it for wasm and runs its own tests: the generated code encodes byte for byte as
// encoding/json, decodes as it does, and deep copies share nothing.
func TestGeneratedTypesRoundTrip(t *testing.T) {
	dir := testenv.PluginModule(t, "testdata/shop")
	changed, err := Generate(dir, env)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "api", "v1", FileName)
	if len(changed) != 1 || changed[0] != want {
		t.Fatalf("changed %v, want [%s]", changed, want)
	}
	src, _ := os.ReadFile(want)
	for _, s := range []string{
		`func (*Order) APIVersionKind() (apiVersion, kind string) { return "shop.example.com/v1", "Order" }`,
		"func (x *OrderList) FilterItems(",
		"func (x *Lines) DeepCopyInto(",
		"func (x *Address) EncodeJSON(",
	} {
		if !strings.Contains(string(src), s) {
			t.Errorf("%s lacks %s", FileName, s)
		}
	}
	if strings.Contains(string(src), "helper") {
		t.Errorf("%s generates for a type marked generate=false", FileName)
	}
	run(t, dir, nil, "test", "-count=1", "./...")
	run(t, dir, []string{"GOOS=wasip1", "GOARCH=wasm"}, "vet", "./...")

	// Once more: nothing changes.
	if changed, err := Generate(dir, env); err != nil || len(changed) != 0 {
		t.Errorf("second run: changed %v, %v", changed, err)
	}
	// A package that no longer has markers loses the file.
	for _, name := range []string{"groupversion.go", "order_types.go", "order_test.go"} {
		os.Remove(filepath.Join(dir, "api", "v1", name))
	}
	os.WriteFile(filepath.Join(dir, "api", "v1", "plain.go"), []byte("package v1\n"), 0o644)
	if changed, err := Generate(dir, env); err != nil || len(changed) != 1 {
		t.Errorf("after the markers went: changed %v, %v", changed, err)
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Errorf("%s is still there", want)
	}
}

// TestGenerateRefuses writes one package per case and checks that generation stops with an
// error that names the type, the field and what to do.
func TestGenerateRefuses(t *testing.T) {
	const head = "// +groupName=x.example.com\npackage v1\n\nimport metav1 \"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1\"\n\n" +
		"// +kubebuilder:object:root=true\ntype Thing struct {\n\tmetav1.TypeMeta `json:\",inline\"`\n\tmetav1.ObjectMeta `json:\"metadata,omitempty\"`\n\tSpec ThingSpec `json:\"spec\"`\n}\n\n"
	for name, c := range map[string]struct {
		src, extra string
		want       []string
	}{
		"channel": {src: head + "type ThingSpec struct {\n\tC chan int `json:\"c\"`\n}\n",
			want: []string{"Thing.Spec: ThingSpec.C", "chan int"}},
		"time.Time": {src: strings.Replace(head, "import ", "import \"time\"\nimport ", 1) + "type ThingSpec struct {\n\tAt time.Time `json:\"at\"`\n}\n",
			want: []string{"ThingSpec.At", "time.Time", "metav1.Time"}},
		"int16": {src: head + "type ThingSpec struct {\n\tN int16 `json:\"n\"`\n}\n",
			want: []string{"ThingSpec.N", "int16"}},
		"controller-gen's deep copies": {src: head + "type ThingSpec struct{}\n",
			extra: "package v1\n\nfunc (in *Thing) DeepCopyInto(out *Thing) { *out = *in }\n",
			want:  []string{"Thing.DeepCopyInto is declared in zz_generated.deepcopy.go", "remove it"}},
		"no group": {src: strings.Replace(head, "// +groupName=x.example.com\n", "", 1) + "type ThingSpec struct{}\n",
			want: []string{"Thing is a kind", "+groupName="}},
		"a version but no group": {src: strings.Replace(head, "// +groupName=x.example.com\n", "// +versionName=v2\n", 1) + "type ThingSpec struct{}\n",
			want: []string{"Thing is a kind", "+groupName="}},
		"own MarshalJSON": {src: head + "type ThingSpec struct{ W Weird `json:\"w\"` }\n\ntype Weird struct{}\n\nfunc (Weird) MarshalJSON() ([]byte, error) { return nil, nil }\n",
			want: []string{"ThingSpec.W", "MarshalJSON"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := testenv.PluginModule(t, "testdata/empty")
			api := filepath.Join(dir, "api", "v1")
			os.MkdirAll(api, 0o755)
			os.WriteFile(filepath.Join(api, "types.go"), []byte(c.src), 0o644)
			if c.extra != "" {
				os.WriteFile(filepath.Join(api, "zz_generated.deepcopy.go"), []byte(c.extra), 0o644)
			}
			_, err := Generate(dir, env)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(c.want, "./api/v1") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(filepath.Join(api, FileName)); !os.IsNotExist(err) {
				t.Errorf("%s was written", FileName)
			}
		})
	}
}
