package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"os"
	"slices"
	"strings"
	"unicode"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmrec/wasmrec/internal/kinds"
)

// A kind's CRD, read from a file a user gave (wasmrec new --crd), and the Go types written from
// its schema: what `wasmrec new --for` of a custom resource starts from when the CRD exists.

// crdFile is the CRD of k in the YAML file path (one document, or many separated by ---), and
// that document's bytes as they are in the file.
func crdFile(path string, k kinds.Kind) (*apiextensionsv1.CustomResourceDefinition, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--crd: %w", err)
	}
	var found []string
	for _, doc := range splitYAML(b) {
		var probe struct{ Kind, APIVersion string }
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, nil, fmt.Errorf("--crd %s: not YAML (%v): give the CRD as YAML, as kubectl get crd NAME -o yaml writes it", path, err)
		}
		if probe.Kind != "CustomResourceDefinition" || probe.APIVersion != "apiextensions.k8s.io/v1" {
			continue // another kind of object in the file
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(doc, &crd); err != nil {
			return nil, nil, fmt.Errorf("--crd %s: a CustomResourceDefinition that does not read as apiextensions.k8s.io/v1: %w", path, err)
		}
		found = append(found, crd.Spec.Group+"/"+crd.Spec.Names.Kind)
		if crd.Spec.Group != k.Group || crd.Spec.Names.Kind != k.Kind {
			continue
		}
		var versions []string
		for _, v := range crd.Spec.Versions {
			if v.Name == k.Version {
				if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
					return nil, nil, fmt.Errorf("--crd %s: version %s of %s has no schema to write Go types from", path, k.Version, crd.Name)
				}
				return &crd, bytes.TrimSpace(doc), nil
			}
			versions = append(versions, v.Name)
		}
		return nil, nil, fmt.Errorf("--crd %s: %s serves versions %s, not %s: change --for", path, crd.Name, strings.Join(versions, ", "), k.Version)
	}
	if len(found) == 0 {
		return nil, nil, fmt.Errorf("--crd %s: no apiextensions.k8s.io/v1 CustomResourceDefinition in the file (kubectl get crd NAME -o yaml writes one)", path)
	}
	return nil, nil, fmt.Errorf("--crd %s: it defines %s, not %s/%s: change --for or --crd", path, strings.Join(found, ", "), k.Group, k.Kind)
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
	for _, name := range sortedKeys(root.Properties) {
		if name == "apiVersion" || name == "kind" || name == "metadata" {
			continue
		}
		p := root.Properties[name]
		// spec and status are values, as in kubebuilder's types: obj.Spec.Size reads without a
		// nil check, and an empty one is left out.
		req := slices.Contains(root.Required, name)
		goType := g.typeOf(kind+goField(name), name, &p, true, req || p.Type == "object")
		tag := name
		switch {
		case req:
		case p.Type == "object" && !strings.HasPrefix(goType, "map["):
			tag += ",omitzero"
		default:
			tag += ",omitempty"
		}
		writeDoc(&fields, "\t", p.Description)
		fmt.Fprintf(&fields, "\t%s %s `json:%q`\n\n", goField(name), goType, tag)
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
	writeDoc(&out, "", cmpOr(root.Description, fmt.Sprintf("%s is the Schema for the %s API.", kind, crd.Spec.Names.Plural)))
	fmt.Fprintf(&out, "type %s struct {\n\tmetav1.TypeMeta   `json:\",inline\"`\n\tmetav1.ObjectMeta `json:\"metadata,omitzero\"`\n\n%s}\n\n", kind, fields.Bytes())
	fmt.Fprintf(&out, "// +kubebuilder:object:root=true\n\n// %sList is a list of %s objects.\ntype %sList struct {\n\tmetav1.TypeMeta `json:\",inline\"`\n\tmetav1.ListMeta `json:\"metadata,omitzero\"`\n\tItems           []%s `json:\"items\"`\n}\n", kind, kind, kind, kind)
	out.Write(g.decls.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the Go types written from %s do not parse: %w", crd.Name, err)
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

// conditionFields are metav1.Condition's JSON fields: an array of objects of these, with type
// and status, is a []metav1.Condition.
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
		if field && (s.Nullable || s.Default != nil) {
			return "*string"
		}
		return "string"
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
		return "[]" + g.typeOf(name, path+"[*]", it, false, true)
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
	_, t := s.Properties["type"]
	_, st := s.Properties["status"]
	return t && st
}

// structOf declares the struct of schema s, at path, under a name not yet taken (name, or
// name2...) and returns that name.
func (g *typeGen) structOf(name, path string, s *apiextensionsv1.JSONSchemaProps) string {
	n := name
	for i := 2; g.names[n]; i++ {
		n = fmt.Sprintf("%s%d", name, i)
	}
	g.names[n] = true
	var body bytes.Buffer
	for _, f := range sortedKeys(s.Properties) {
		p := s.Properties[f]
		req := slices.Contains(s.Required, f)
		t := g.typeOf(n+goField(f), path+"."+f, &p, true, req)
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
		fmt.Fprintf(&body, "\t%s %s `json:%q`\n", goField(f), t, tag)
	}
	g.decls.WriteString("\n")
	writeDoc(&g.decls, "", cmpOr(s.Description, fmt.Sprintf("%s is the object at %s.", n, path)))
	fmt.Fprintf(&g.decls, "type %s struct {\n%s}\n", n, body.Bytes())
	return n
}

// markers are the kubebuilder validation markers of what the schema checks of a field, for the
// reader: the CRD in crds/ is what the API server enforces.
func markers(s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if len(s.Enum) > 0 {
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
	return out
}

// goField is the Go name of a JSON field: its words capitalized, common initialisms in capitals
// (apiVersion: APIVersion, podIP: PodIP), what a Go name cannot hold left out.
func goField(json string) string {
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
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	s := b.String()
	if s == "" || unicode.IsDigit(rune(s[0])) {
		s = "F" + s
	}
	return s
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

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
