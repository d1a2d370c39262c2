package scaffold

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/internal/crdgen"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// widget is a Widget that sets every field of testdata/widgets.yaml's schema, as JSON.
const widget = `{"apiVersion":"shop.example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"shop"},
"spec":{"size":3,"weight":9000000000,"ratio":0.5,"paused":false,"color":"green","lane":"fast-lane","éclair":"e","日本":"j","serialID":"A-1","serial_id":"a-1",
"madeAt":"2026-01-02T03:04:05Z","port":"http","memory":"1Gi","labels":{"a":"b"},"limits":{"x":{"max":2}},
"parts":[{"name":"bolt","count":0,"tags":["m4"]},{"name":"nut"}],
"template":{"metadata":{"name":"box","labels":{"k":"v"}},"spec":{"fragile":true}},
"extra":{"anything":[1,"two",{"three":3}]},"note":"hi"},
"status":{"observedGeneration":2,"conditions":[{"type":"Ready","status":"True","observedGeneration":2,"lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Made","message":"made"}]}}`

// roundTrip is a test put in the written package: the codec wasmrec build generates reads
// widget and writes it back as it was (no field lost, none added: zero values that were set,
// such as count 0 and paused false, stay), and encoding/json reads it the same.
const roundTrip = `package v1

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/wasmrec/wasmrec/sdk/go/codec"
)

func TestTheTypesHoldEveryFieldOfTheSchema(t *testing.T) {
	in := []byte(` + "`" + widget + "`" + `)
	var w Widget
	if err := codec.Unmarshal(in, &w); err != nil {
		t.Fatal(err)
	}
	out, err := codec.Marshal(&w)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal(in, &a)
	_ = json.Unmarshal(out, &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("read and written back:\n%s\nwant\n%s", out, in)
	}
	var std Widget
	if err := json.Unmarshal(in, &std); err != nil || !reflect.DeepEqual(std, w) {
		t.Errorf("encoding/json reads %+v (%v), the codec %+v", std, err, w)
	}
	if w.Spec.Parts[0].Count == nil || *w.Spec.Parts[0].Count != 0 || w.Spec.Paused == nil || *w.Spec.Paused {
		t.Errorf("optional numbers and bools set to zero are lost: %+v", w.Spec)
	}
	if w.Spec.Color == nil || *w.Spec.Color != WidgetSpecColorGreen || w.Spec.Lane != WidgetSpecLaneFastLane {
		t.Errorf("enums read as %v and %q", w.Spec.Color, w.Spec.Lane)
	}
}
`

func TestACustomResourceIsTypedFromItsCRD(t *testing.T) {
	src := filepath.Join(t.TempDir(), "widget")
	files, err := Write(Options{Name: "widget", Lang: "go", For: "shop.example.com/v1/Widget", Dir: src, CRD: "testdata/widgets.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "crds/widgets.shop.example.com.yaml") || !slices.Contains(files, "api/v1/widget_types.go") {
		t.Fatalf("files %v", files)
	}
	crd, _ := os.ReadFile(filepath.Join(src, "crds", "widgets.shop.example.com.yaml"))
	if !strings.HasPrefix(string(crd), "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.shop.example.com\n") || strings.Contains(string(crd), "kind: Namespace\n") || strings.Contains(string(crd), "gadget") {
		t.Errorf("crds/ holds\n%s\nwant the Widget's CRD as the file has it, alone", crd)
	}
	types, _ := os.ReadFile(filepath.Join(src, "api", "v1", "widget_types.go"))
	for _, want := range []string{
		"// +kubebuilder:subresource:status\n\n// Widget is a thing the shop sells.\ntype Widget struct {",
		"\tSpec WidgetSpec `json:\"spec,omitzero\"`\n",
		"\t// Size in centimetres.\n\t// +kubebuilder:validation:Minimum=1\n\tSize int32 `json:\"size\"`\n",
		"\t// +kubebuilder:default=\"red\"\n\t// +optional\n\tColor *WidgetSpecColor `json:\"color,omitempty\"`\n",
		"// WidgetSpecColor is the value at spec.color: one of the constants below.\n// +kubebuilder:validation:Enum=red;green;blue\ntype WidgetSpecColor string\n",
		"\tWidgetSpecColorRed   WidgetSpecColor = \"red\"\n\tWidgetSpecColorGreen WidgetSpecColor = \"green\"\n\tWidgetSpecColorBlue  WidgetSpecColor = \"blue\"\n",
		"// +kubebuilder:validation:Enum=\"\";fast-lane;fastLane;\"fast lane\";é;日本;1x\ntype WidgetSpecLane string\n",
		"\tWidgetSpecLaneEmpty     WidgetSpecLane = \"\"\n\tWidgetSpecLaneFastLane  WidgetSpecLane = \"fast-lane\"\n\tWidgetSpecLaneFastLane2 WidgetSpecLane = \"fastLane\"\n\tWidgetSpecLaneFastLane3 WidgetSpecLane = \"fast lane\"\n\tWidgetSpecLaneÉ         WidgetSpecLane = \"é\"\n\tWidgetSpecLane日本        WidgetSpecLane = \"日本\"\n\tWidgetSpecLane1x        WidgetSpecLane = \"1x\"\n",
		"\tÉclair string `json:\"éclair,omitempty\"`\n",
		"\tF日本 string `json:\"日本,omitempty\"`\n",
		"\tLane WidgetSpecLane `json:\"lane,omitempty\"`\n",
		"\t// +listType=map\n\t// +listMapKey=name\n\tParts []WidgetSpecPart `json:\"parts\"`\n",
		"// WidgetSpecPart is the object at spec.parts[*].\ntype WidgetSpecPart struct {",
		"\tSerialID2 string `json:\"serial_id,omitempty\"`\n",
		"\tSerialID string `json:\"serialID,omitempty\"`\n",
		"\tMemory *resource.Quantity `json:\"memory,omitempty\"`\n",
		"\tPort *intstr.IntOrString `json:\"port,omitempty\"`\n",
		"\tMadeAt *metav1.Time `json:\"madeAt,omitempty\"`\n",
		"\tExtra *runtime.RawExtension `json:\"extra,omitempty\"`\n",
		"\tMetadata metav1.ObjectMeta `json:\"metadata,omitzero\"`\n",
		"\tConditions []metav1.Condition `json:\"conditions,omitempty\"`\n",
		"\tOnPodConditions []WidgetStatusOnPodCondition `json:\"onPodConditions,omitempty\"`\n",
		"// WidgetSpecLimits is the object at spec.limits.*.\n",
	} {
		if !strings.Contains(string(types), want) {
			t.Errorf("widget_types.go lacks %q:\n%s", want, types)
		}
	}

	// Built for wasm with its generated code, the types read and write every field.
	dir := testenv.PluginModule(t, src)
	if err := os.WriteFile(filepath.Join(dir, "api", "v1", "roundtrip_test.go"), []byte(roundTrip), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if _, err := crdgen.Generate(dir, env); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"test", "-count=1", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		if args[0] == "vet" {
			cmd.Env = append(cmd.Env, "GOOS=wasip1", "GOARCH=wasm")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func TestACRDsScopeAndPluralAreTheKinds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gadget")
	files, err := Write(Options{Name: "gadget", Lang: "c", For: "shop.example.com/v1/Gadget", Dir: dir, CRD: "testdata/widgets.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "crds/gadgetries.shop.example.com.yaml") {
		t.Errorf("files %v: want the CRD under its plural, gadgetries", files)
	}
	sample, _ := os.ReadFile(filepath.Join(dir, "samples", "gadget.yaml"))
	host, _ := os.ReadFile(filepath.Join(dir, "host.yaml"))
	if strings.Contains(string(sample), "namespace:") || !strings.Contains(string(host), "gadgetries") {
		t.Errorf("a cluster-scoped kind's sample has a namespace, or host.yaml does not grant its plural:\n%s\n%s", sample, host)
	}
}

func TestACRDThatDoesNotServeTheKindIsRefused(t *testing.T) {
	for _, tc := range []struct{ for_, crd, want string }{
		{"shop.example.com/v2/Widget", "testdata/widgets.yaml", "--crd testdata/widgets.yaml: widgets.shop.example.com serves versions v1beta1, v1, not v2: change --for"},
		{"shop.example.com/v2alpha1/Widget", "testdata/widgets.yaml", "--crd testdata/widgets.yaml: widgets.shop.example.com does not serve version v2alpha1 (served: false): use one it serves, v1beta1, v1, in --for"},
		{"shop.example.com/v1/Sprocket", "testdata/widgets.yaml", "--crd testdata/widgets.yaml: no CustomResourceDefinition of shop.example.com/Sprocket; the file holds v1 Namespace shop, the CustomResourceDefinition of shop.example.com/Widget, the CustomResourceDefinition of shop.example.com/Gadget (kubectl get crd NAME -o yaml writes one)"},
		{"", "testdata/widgets.yaml", "--crd testdata/widgets.yaml: it holds v1 Namespace shop, the CustomResourceDefinition of shop.example.com/Widget, the CustomResourceDefinition of shop.example.com/Gadget: say which kind with --for GROUP/VERSION/KIND"},
		{"v1/Widget", "testdata/widgets.yaml", "--crd testdata/widgets.yaml defines shop.example.com/Widget: use its group in --for (or leave --for out)"},
		{"apps/v1/Deployment", "testdata/widgets.yaml", "--crd: apps/v1/Deployment is a built-in kind, which has no CustomResourceDefinition: leave --crd out"},
		{"shop.example.com/v1/Widget", "testdata/missing.yaml", "--crd: open testdata/missing.yaml: no such file or directory"},
		{"shop.example.com/v1/Widget", "scaffold.go", "--crd scaffold.go: not YAML ("},
		{"shop.example.com/v1/Widget", "testdata/namespace.yaml", "--crd testdata/namespace.yaml: no CustomResourceDefinition of shop.example.com/Widget; the file holds v1 Namespace shop (kubectl get crd NAME -o yaml writes one)"},
		{"shop.example.com/v1/Widget", "testdata/notes.txt", "--crd testdata/notes.txt: no CustomResourceDefinition of shop.example.com/Widget; the file holds a document that is not a Kubernetes object"},
	} {
		dir := filepath.Join(t.TempDir(), "x")
		_, err := Write(Options{Name: "x", Lang: "go", For: tc.for_, Dir: dir, CRD: tc.crd})
		if err == nil || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) && !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("--for %s --crd %s: %v\nwant %s", tc.for_, tc.crd, err, tc.want)
		}
		if _, statErr := os.Stat(dir); statErr == nil {
			t.Errorf("--for %s --crd %s: the folder was made", tc.for_, tc.crd)
		}
	}
}

// kubectl get crd -o yaml of several writes a List, and the API server a
// CustomResourceDefinitionList whose items name no kind; with one CRD, --for may be left out.
func TestACRDInAListNamesTheKind(t *testing.T) {
	gadget, _ := os.ReadFile("testdata/widgets.yaml")
	doc := strings.TrimSpace(string(gadget[strings.LastIndex(string(gadget), "---\n")+4:]))
	typed := strings.Replace(strings.Replace(doc, "apiVersion: apiextensions.k8s.io/v1\n", "", 1), "kind: CustomResourceDefinition\n", "", 1)
	for name, list := range map[string]string{
		"List":                         "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(doc, "\n", "\n  ") + "\n",
		"CustomResourceDefinitionList": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinitionList\nitems:\n- " + strings.ReplaceAll(typed, "\n", "\n  ") + "\n",
	} {
		t.Run(name, func(t *testing.T) { writeFromList(t, list) })
	}
}

func writeFromList(t *testing.T, items string) {
	list := filepath.Join(t.TempDir(), "crds.yaml")
	if err := os.WriteFile(list, []byte(items), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "gadget")
	files, err := Write(Options{Name: "gadget", Lang: "go", Dir: dir, CRD: list})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "crds/gadgetries.shop.example.com.yaml") || !slices.Contains(files, "api/v1/gadget_types.go") {
		t.Errorf("files %v: want the Gadget's CRD and types", files)
	}
	crd, _ := os.ReadFile(filepath.Join(dir, "crds", "gadgetries.shop.example.com.yaml"))
	if !strings.Contains(string(crd), "kind: CustomResourceDefinition") || strings.Contains(string(crd), "kind: List") {
		t.Errorf("crds/ holds\n%s\nwant the CRD alone", crd)
	}
}

// The sample of a kind whose CRD requires fields has them, with values its schema takes, as
// the API server's own validator of custom resources judges them.
func TestASampleHoldsWhatTheCRDRequires(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "widget")
	if _, err := Write(Options{Name: "widget", Lang: "c", For: "shop.example.com/v1/Widget", Dir: dir, CRD: "testdata/widgets.yaml"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "samples", "widget.yaml"))
	var sample map[string]any
	if err := yaml.Unmarshal(b, &sample); err != nil {
		t.Fatal(err)
	}
	crds, _, err := readCRDs("testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crds[0].crd.Spec.Versions[2].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	validator, _, err := validation.NewSchemaValidator(&internal)
	if err != nil {
		t.Fatal(err)
	}
	if sample["spec"] == nil {
		t.Fatalf("the sample has no spec, which holds fields the CRD requires:\n%s", b)
	}
	if errs := validation.ValidateCustomResource(nil, sample, validator); len(errs) > 0 {
		t.Errorf("the sample\n%s\nis refused: %v", b, errs.ToAggregate())
	}
}
