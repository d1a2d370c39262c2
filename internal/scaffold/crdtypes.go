package scaffold

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/internal/kinds"
)

// A kind's CRD, read from a file a user gave (wasmrec new --crd), and the Go types written from
// its schema: what `wasmrec new --for` of a custom resource starts from when the CRD exists.

// crdDoc is a CustomResourceDefinition read from a file, and its YAML as the file has it (as
// JSON converted to YAML for an item of a List).
type crdDoc struct {
	crd *apiextensionsv1.CustomResourceDefinition
	doc []byte
}

// readCRDs reads the CustomResourceDefinitions of the YAML file path: its documents (one, or
// many separated by ---) and the items of a List among them, as kubectl get crd -o yaml writes
// several. holds says what the file holds, for an error.
func readCRDs(path string) (crds []crdDoc, holds []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--crd: %w", err)
	}
	var read func(doc []byte, yamlDoc bool) error
	read = func(doc []byte, yamlDoc bool) error {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return fmt.Errorf("--crd %s: not YAML (%v): give the CRD as YAML, as kubectl get crd NAME -o yaml writes it", path, err)
		}
		var probe struct {
			Kind, APIVersion string
			Metadata         struct{ Name string }
			Items            []json.RawMessage
		}
		if err := json.Unmarshal(js, &probe); err != nil || probe.Kind == "" {
			holds = append(holds, "a document that is not a Kubernetes object")
			return nil
		}
		switch {
		case probe.Kind == "List" || strings.HasSuffix(probe.Kind, "List") && probe.Items != nil:
			for _, it := range probe.Items {
				if probe.Kind != "List" { // a typed list's items (the API server's CustomResourceDefinitionList) name no kind
					var m map[string]any
					if json.Unmarshal(it, &m) == nil && m["kind"] == nil {
						m["kind"], m["apiVersion"] = strings.TrimSuffix(probe.Kind, "List"), probe.APIVersion
						it, _ = json.Marshal(m)
					}
				}
				if err := read(it, false); err != nil {
					return err
				}
			}
			return nil
		case probe.Kind != "CustomResourceDefinition" || probe.APIVersion != "apiextensions.k8s.io/v1":
			holds = append(holds, strings.TrimSpace(fmt.Sprintf("%s %s %s", probe.APIVersion, probe.Kind, probe.Metadata.Name)))
			return nil
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(doc, &crd); err != nil {
			return fmt.Errorf("--crd %s: the CustomResourceDefinition %s does not read as apiextensions.k8s.io/v1: %w", path, probe.Metadata.Name, err)
		}
		holds = append(holds, fmt.Sprintf("the CustomResourceDefinition of %s/%s", crd.Spec.Group, crd.Spec.Names.Kind))
		if !yamlDoc {
			if doc, err = yaml.JSONToYAML(doc); err != nil {
				return err
			}
		}
		crds = append(crds, crdDoc{&crd, bytes.TrimSpace(doc)})
		return nil
	}
	for _, doc := range splitYAML(b) {
		if err := read(doc, true); err != nil {
			return nil, nil, err
		}
	}
	return crds, holds, nil
}

// noCRD is the error for a file without the CRD wanted: what it holds, and how to get a CRD.
func noCRD(path string, holds []string, what string) error {
	hint := "kubectl get crd NAME -o yaml writes one"
	if slices.ContainsFunc(holds, func(h string) bool { return strings.HasPrefix(h, "apiextensions.k8s.io/v1beta1 ") }) {
		hint = "apiextensions.k8s.io/v1beta1 CRDs are served no more since Kubernetes 1.22: kubectl get crd NAME -o yaml reads one back as v1"
	}
	if len(holds) == 0 {
		holds = []string{"nothing"}
	}
	return fmt.Errorf("--crd %s: %s; the file holds %s (%s)", path, what, strings.Join(holds, ", "), hint)
}

// pickCRD is the CRD of k among crds, and checks that it serves k's version with a schema.
func pickCRD(path string, crds []crdDoc, holds []string, k kinds.Kind) (*crdDoc, error) {
	for i := range crds {
		crd := crds[i].crd
		if crd.Spec.Group != k.Group || crd.Spec.Names.Kind != k.Kind {
			continue
		}
		var served []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served = append(served, v.Name)
			}
		}
		for _, v := range crd.Spec.Versions {
			switch {
			case v.Name != k.Version:
			case !v.Served:
				return nil, fmt.Errorf("--crd %s: %s does not serve version %s (served: false): use one it serves, %s, in --for", path, crd.Name, k.Version, strings.Join(served, ", "))
			case v.Schema == nil || v.Schema.OpenAPIV3Schema == nil:
				return nil, fmt.Errorf("--crd %s: version %s of %s has no schema to write Go types from", path, k.Version, crd.Name)
			default:
				return &crds[i], nil
			}
		}
		return nil, fmt.Errorf("--crd %s: %s serves versions %s, not %s: change --for", path, crd.Name, strings.Join(served, ", "), k.Version)
	}
	return nil, noCRD(path, holds, fmt.Sprintf("no CustomResourceDefinition of %s/%s", k.Group, k.Kind))
}

// forOf is the --for of the one CRD of the file: its group, its storage version and its kind.
func forOf(path string, crds []crdDoc, holds []string) (string, error) {
	if len(crds) != 1 {
		if len(crds) == 0 {
			return "", noCRD(path, holds, "no apiextensions.k8s.io/v1 CustomResourceDefinition")
		}
		return "", fmt.Errorf("--crd %s: it holds %s: say which kind with --for GROUP/VERSION/KIND", path, strings.Join(holds, ", "))
	}
	crd := crds[0].crd
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return crd.Spec.Group + "/" + v.Name + "/" + crd.Spec.Names.Kind, nil
		}
	}
	return "", fmt.Errorf("--crd %s: %s stores no version: say which with --for", path, crd.Name)
}

// splitYAML splits a YAML stream into its documents.
func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	for line := range bytes.Lines(b) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) {
			docs = append(docs, cur)
			cur = nil
			continue
		}
		cur = append(cur, line...)
	}
	docs = append(docs, cur)
	return slices.DeleteFunc(docs, func(d []byte) bool { return len(bytes.TrimSpace(d)) == 0 })
}

// typesFromSchema writes the Go file of package pkg that holds kind's type, its List, and a
// named struct for each object of its schema: kubebuilder-style types that wasmrec build
// generates code for. Field names, tags and doc comments come from the schema; an optional
// object, number or bool is a pointer (so that unset and zero differ, as defaulting needs).
func typesFromSchema(pkg string, crd *apiextensionsv1.CustomResourceDefinition, version string) ([]byte, error) {
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			v = &crd.Spec.Versions[i]
		}
	}
	if v == nil || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, errors.New("no schema")
	}
	kind := crd.Spec.Names.Kind
	g := &typeGen{names: map[string]bool{kind: true, kind + "List": true}, imports: map[string]bool{}}
	root := v.Schema.OpenAPIV3Schema
	var fields bytes.Buffer
	taken := map[string]bool{"TypeMeta": true, "ObjectMeta": true}
	for _, name := range sortedKeys(root.Properties) {
		if name == "apiVersion" || name == "kind" || name == "metadata" {
			continue
		}
		p := root.Properties[name]
		// spec and status are values, as in kubebuilder's types: obj.Spec.Size reads without a
		// nil check, and an empty one is left out.
		req := slices.Contains(root.Required, name)
		field := uniqueName(goField(name), taken)
		goType := g.typeOf(kind+field, name, &p, true, req || p.Type == "object")
		tag := name
		switch {
		case req:
		case p.Type == "object" && !strings.HasPrefix(goType, "map["):
			tag += ",omitzero"
		default:
			tag += ",omitempty"
		}
		writeDoc(&fields, "\t", p.Description)
		fmt.Fprintf(&fields, "\t%s %s `json:%q`\n\n", field, goType, tag)
	}
	g.imports["metav1 \"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1\""] = true

	var out bytes.Buffer
	fmt.Fprintf(&out, "// Code written by wasmrec new from the schema of the CustomResourceDefinition %s\n// (version %s). It is yours to change: keep it in step with the CRD in crds/.\n\npackage %s\n\nimport (\n", crd.Name, version, pkg)
	for _, imp := range sortedKeys(g.imports) {
		fmt.Fprintf(&out, "\t%s\n", imp)
	}
	out.WriteString(")\n\n")
	out.WriteString("// +kubebuilder:object:root=true\n")
	if v.Subresources != nil && v.Subresources.Status != nil {
		out.WriteString("// +kubebuilder:subresource:status\n")
	}
	if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
		out.WriteString("// +kubebuilder:resource:scope=Cluster\n")
	}
	out.WriteString("\n")
	writeDoc(&out, "", cmp.Or(root.Description, fmt.Sprintf("%s is the Schema for the %s API.", kind, crd.Spec.Names.Plural)))
	fmt.Fprintf(&out, "type %s struct {\n\tmetav1.TypeMeta   `json:\",inline\"`\n\tmetav1.ObjectMeta `json:\"metadata,omitzero\"`\n\n%s}\n\n", kind, fields.Bytes())
	fmt.Fprintf(&out, "// +kubebuilder:object:root=true\n\n// %sList is a list of %s objects.\ntype %sList struct {\n\tmetav1.TypeMeta `json:\",inline\"`\n\tmetav1.ListMeta `json:\"metadata,omitzero\"`\n\tItems           []%s `json:\"items\"`\n}\n", kind, kind, kind, kind)
	out.Write(g.decls.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the Go types written from the schema of %s do not parse (%w): a defect of wasmrec new, please report it with the CRD; leave --crd out and write the types in api/ yourself meanwhile", crd.Name, err)
	}
	return src, nil
}

type typeGen struct {
	names   map[string]bool // type names taken
	imports map[string]bool // `alias "path"`
	decls   bytes.Buffer    // the named structs, in the order they were met
}

const (
	sdkK8s        = "github.com/wasmrec/wasmrec/sdk/go/k8s/"
	importMetav1  = `metav1 "` + sdkK8s + `apimachinery/pkg/apis/meta/v1"`
	importRuntime = `runtime "` + sdkK8s + `apimachinery/pkg/runtime"`
	importIntstr  = `intstr "` + sdkK8s + `apimachinery/pkg/util/intstr"`
	importQty     = `resource "` + sdkK8s + `apimachinery/pkg/api/resource"`
)

// conditionFields are metav1.Condition's JSON fields: an array of objects of these, with every
// one it always writes (all but observedGeneration), is a []metav1.Condition. One of type and
// status alone (batch/v1's onPodConditions patterns) is not: a Condition would write the others.
var conditionFields = []string{"type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"}

// typeOf is the Go type of a value of schema s at path (spec.parts[*]) of the object; name is
// the name a struct of it takes, field says s is a struct field (not a list's or map's element),
// and required that the field must be set.
func (g *typeGen) typeOf(name, path string, s *apiextensionsv1.JSONSchemaProps, field, required bool) string {
	ptr := func(t string) string {
		if field && (!required || s.Nullable) {
			return "*" + t
		}
		return t
	}
	switch {
	case s.XEmbeddedResource || (s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && len(s.Properties) == 0):
		g.imports[importRuntime] = true
		return ptr("runtime.RawExtension")
	case s.XIntOrString:
		if strings.Contains(s.Pattern, "[KMGTPE]i") { // a resource.Quantity's pattern
			g.imports[importQty] = true
			return ptr("resource.Quantity")
		}
		g.imports[importIntstr] = true
		return ptr("intstr.IntOrString")
	}
	switch s.Type {
	case "string":
		switch s.Format {
		case "date-time":
			g.imports[importMetav1] = true
			return ptr("metav1.Time")
		case "byte":
			return "[]byte"
		}
		t := "string"
		if e := g.enumOf(name, path, s); e != "" {
			t = e
		}
		if field && (s.Nullable || s.Default != nil) {
			return "*" + t
		}
		return t
	case "boolean":
		return ptr("bool")
	case "integer":
		if s.Format == "int32" {
			return ptr("int32")
		}
		return ptr("int64")
	case "number":
		return ptr("float64")
	case "array":
		if s.Items == nil || s.Items.Schema == nil {
			g.imports[importRuntime] = true
			return "[]runtime.RawExtension"
		}
		it := s.Items.Schema
		if isCondition(it) {
			g.imports[importMetav1] = true
			return "[]metav1.Condition"
		}
		return "[]" + g.typeOf(singular(name), path+"[*]", it, false, true)
	case "object":
		if name == "" {
			break
		}
		if len(s.Properties) == 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			return "map[string]" + g.typeOf(name, path+".*", s.AdditionalProperties.Schema, false, true)
		}
		if len(s.Properties) == 0 && strings.HasSuffix(name, "Metadata") && field {
			g.imports[importMetav1] = true // an embedded object's metadata: controller-gen writes ObjectMeta as type: object
			return "metav1.ObjectMeta"
		}
		return ptr(g.structOf(name, path, s))
	}
	g.imports[importRuntime] = true // anyOf, oneOf, no type: any JSON
	return ptr("runtime.RawExtension")
}

func isCondition(s *apiextensionsv1.JSONSchemaProps) bool {
	if s.Type != "object" || len(s.Properties) == 0 {
		return false
	}
	for f := range s.Properties {
		if !slices.Contains(conditionFields, f) {
			return false
		}
	}
	for _, f := range conditionFields {
		if _, ok := s.Properties[f]; !ok && f != "observedGeneration" {
			return false
		}
	}
	return true
}

// structOf declares the struct of schema s, at path, under a name not yet taken (name, or
// name2...) and returns that name.
func (g *typeGen) structOf(name, path string, s *apiextensionsv1.JSONSchemaProps) string {
	n := uniqueName(name, g.names)
	var body bytes.Buffer
	taken := map[string]bool{}
	for _, f := range sortedKeys(s.Properties) {
		p := s.Properties[f]
		req := slices.Contains(s.Required, f)
		field := uniqueName(goField(f), taken) // fooBar and foo_bar: FooBar and FooBar2
		t := g.typeOf(n+field, path+"."+f, &p, true, req)
		writeDoc(&body, "\t", p.Description)
		for _, m := range markers(&p) {
			fmt.Fprintf(&body, "\t// %s\n", m)
		}
		tag := f
		switch {
		case req:
		case t == "metav1.ObjectMeta":
			tag += ",omitzero"
		default:
			tag += ",omitempty"
		}
		if !req {
			body.WriteString("\t// +optional\n")
		}
		fmt.Fprintf(&body, "\t%s %s `json:%q`\n", field, t, tag)
	}
	g.decls.WriteString("\n")
	writeDoc(&g.decls, "", fmt.Sprintf("%s is the object at %s.", n, path)) // its field has the schema's description
	fmt.Fprintf(&g.decls, "type %s struct {\n%s}\n", n, body.Bytes())
	return n
}

// enumOf declares a string type for schema s, at path, whose values are its enum's, with a
// constant for each (CronJobSpecConcurrencyPolicyForbid), as kubebuilder's types name their enums;
// "" if s has no enum of strings. The type is named as a struct there would be.
func (g *typeGen) enumOf(name, path string, s *apiextensionsv1.JSONSchemaProps) string {
	vals := stringEnum(s)
	if len(vals) == 0 {
		return ""
	}
	n := uniqueName(name, g.names)
	g.decls.WriteString("\n")
	writeDoc(&g.decls, "", fmt.Sprintf("%s is the value at %s: one of the constants below.", n, path))
	marked := make([]string, len(vals))
	for i, v := range vals {
		marked[i] = markerValue(v)
	}
	fmt.Fprintf(&g.decls, "// +kubebuilder:validation:Enum=%s\ntype %s string\n\nconst (\n", strings.Join(marked, ";"), n)
	for _, v := range vals {
		word := goWords(v) // after the type's name, which makes it an exported name
		if word == "" {    // "", or no letter or digit
			word = "Empty"
		}
		fmt.Fprintf(&g.decls, "\t%s %s = %q\n", uniqueName(n+word, g.names), n, v)
	}
	g.decls.WriteString(")\n")
	return n
}

// markerValue is v as a kubebuilder marker's list holds it: as it is if it is a plain word,
// else quoted ("", "fast lane", a value with ; or a quote).
func markerValue(v string) string {
	if v != "" && strings.IndexFunc(v, func(r rune) bool { return !isIdent(r) && r != '-' && r != '.' && r != '_' }) < 0 {
		return v
	}
	return strconv.Quote(v)
}

// stringEnum is the strings of s's enum (a nullable enum's null is not one).
func stringEnum(s *apiextensionsv1.JSONSchemaProps) []string {
	var vals []string
	for _, e := range s.Enum {
		var v string
		if json.Unmarshal(e.Raw, &v) == nil {
			vals = append(vals, v)
		}
	}
	return vals
}

// markers are the kubebuilder validation markers of what the schema checks of a field, for the
// reader: the CRD in crds/ is what the API server enforces.
func markers(s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if len(s.Enum) > 0 && (s.Type != "string" || len(stringEnum(s)) == 0) { // a string enum's type says it (enumOf)
		var vals []string
		for _, e := range s.Enum {
			vals = append(vals, strings.Trim(string(e.Raw), `"`))
		}
		out = append(out, "+kubebuilder:validation:Enum="+strings.Join(vals, ";"))
	}
	if s.Minimum != nil {
		out = append(out, fmt.Sprintf("+kubebuilder:validation:Minimum=%v", *s.Minimum))
	}
	if s.Maximum != nil {
		out = append(out, fmt.Sprintf("+kubebuilder:validation:Maximum=%v", *s.Maximum))
	}
	if s.MinLength != nil {
		out = append(out, fmt.Sprintf("+kubebuilder:validation:MinLength=%d", *s.MinLength))
	}
	if s.Default != nil {
		out = append(out, "+kubebuilder:default="+string(s.Default.Raw))
	}
	if s.XListType != nil {
		out = append(out, "+listType="+*s.XListType)
	}
	for _, k := range s.XListMapKeys {
		out = append(out, "+listMapKey="+k)
	}
	if s.XMapType != nil {
		out = append(out, "+mapType="+*s.XMapType)
	}
	return out
}

// goField is the Go name of a JSON field: goWords of it, made an exported name.
func goField(json string) string {
	s := goWords(json)
	// A name must start with a letter, and an upper-case one to be exported (encoding/json and
	// the generated codec skip unexported fields): 1st or 日本 are F1st and F日本.
	if r, _ := utf8.DecodeRuneInString(s); !unicode.IsUpper(r) {
		s = "F" + s
	}
	return s
}

// goWords is json's words capitalized, common initialisms in capitals (apiVersion: APIVersion,
// podIP: PodIP), what a Go name cannot hold left out.
func goWords(json string) string {
	var words []string
	start := 0
	rs := []rune(json)
	for i := 1; i <= len(rs); i++ {
		if i == len(rs) || unicode.IsUpper(rs[i]) || !isIdent(rs[i]) || !isIdent(rs[i-1]) {
			if w := strings.Map(func(r rune) rune {
				if isIdent(r) {
					return r
				}
				return -1
			}, string(rs[start:i])); w != "" {
				words = append(words, w)
			}
			start = i
		}
	}
	var b strings.Builder
	for _, w := range words {
		if up := strings.ToUpper(w); initialisms[up] {
			b.WriteString(up)
			continue
		}
		r, size := utf8.DecodeRuneInString(w)
		b.WriteString(string(unicode.ToUpper(r)) + w[size:])
	}
	return b.String()
}

// uniqueName is name, or name2, name3... if taken, and takes it.
func uniqueName(name string, taken map[string]bool) string {
	n := name
	for i := 2; taken[n]; i++ {
		n = fmt.Sprintf("%s%d", name, i)
	}
	taken[n] = true
	return n
}

// singular is the type name of an item of a list whose type name is plural: Notifications
// gives Notification, Policies Policy, Addresses Address.
func singular(name string) string {
	switch {
	case strings.HasSuffix(name, "ies") && len(name) > 3:
		return name[:len(name)-3] + "y"
	case strings.HasSuffix(name, "sses") || strings.HasSuffix(name, "shes") || strings.HasSuffix(name, "ches") || strings.HasSuffix(name, "xes"):
		return name[:len(name)-2]
	case strings.HasSuffix(name, "s") && !strings.HasSuffix(name, "ss") && !strings.HasSuffix(name, "us") && !strings.HasSuffix(name, "is"):
		return name[:len(name)-1]
	}
	return name
}

func isIdent(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// initialisms are written in capitals in Go names, as in k8s.io/api's.
var initialisms = map[string]bool{
	"API": true, "CIDR": true, "CPU": true, "CSI": true, "DNS": true, "FS": true, "GID": true, "HTTP": true,
	"HTTPS": true, "ID": true, "IP": true, "IPS": false, "JSON": true, "OS": true, "QOS": false, "SSL": true,
	"TCP": true, "TLS": true, "TTL": true, "UDP": true, "UID": true, "URI": true, "URL": true, "UUID": true,
}

// writeDoc writes text as a Go comment, wrapped at about 100 columns, each line after indent.
func writeDoc(b *bytes.Buffer, indent, text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	for _, para := range strings.Split(text, "\n") {
		line := indent + "//"
		for _, w := range strings.Fields(para) {
			if len(line)+1+len(w) > 100 && line != indent+"//" {
				b.WriteString(line + "\n")
				line = indent + "//"
			}
			line += " " + w
		}
		b.WriteString(line + "\n")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sampleBody is what a sample object of the CRD's version needs beside its metadata for the API
// server to take it: the fields the schema requires (spec's, and theirs), with placeholder
// values that pass the schema's enum, minimum, format and length checks. "" if it requires
// nothing.
func sampleBody(crd *apiextensionsv1.CustomResourceDefinition, version string) string {
	var root *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil {
			root = v.Schema.OpenAPIV3Schema
		}
	}
	if root == nil {
		return ""
	}
	body := map[string]any{}
	for _, f := range sortedKeys(root.Properties) {
		p := root.Properties[f]
		switch {
		case f == "apiVersion" || f == "kind" || f == "metadata" || f == "status":
		case slices.Contains(root.Required, f) || len(p.Required) > 0:
			body[f] = sampleOf(&p)
		}
	}
	if len(body) == 0 {
		return ""
	}
	b, err := yaml.Marshal(body)
	if err != nil {
		return ""
	}
	return "# What the CRD requires, with placeholder values: make them yours.\n" + strings.TrimSpace(string(b))
}

// sampleOf is a placeholder value of schema s with what it requires.
func sampleOf(s *apiextensionsv1.JSONSchemaProps) any {
	var v any
	switch {
	case len(s.Enum) > 0 && json.Unmarshal(s.Enum[0].Raw, &v) == nil:
		return v
	case s.Default != nil && json.Unmarshal(s.Default.Raw, &v) == nil:
		return v
	case s.XIntOrString:
		return "1"
	}
	switch s.Type {
	case "object":
		m := map[string]any{}
		for _, f := range s.Required {
			p := s.Properties[f]
			m[f] = sampleOf(&p)
		}
		return m
	case "array":
		var items []any
		for i := int64(0); s.MinItems != nil && i < *s.MinItems; i++ {
			if s.Items != nil && s.Items.Schema != nil {
				items = append(items, sampleOf(s.Items.Schema))
			}
		}
		if items == nil {
			items = []any{}
		}
		return items
	case "integer", "number":
		n := 1.0
		if s.Minimum != nil {
			n = *s.Minimum
			if s.ExclusiveMinimum {
				n++
			}
		}
		if s.Type == "integer" {
			return int64(n)
		}
		return n
	case "boolean":
		return false
	case "string":
		switch s.Format {
		case "date-time":
			return "2026-01-01T00:00:00Z"
		case "date":
			return "2026-01-01"
		}
		v := "example"
		if s.MinLength != nil && int64(len(v)) < *s.MinLength {
			v += strings.Repeat("x", int(*s.MinLength)-len(v))
		}
		if s.MaxLength != nil && int64(len(v)) > *s.MaxLength {
			v = v[:*s.MaxLength]
		}
		return v
	}
	return map[string]any{}
}
