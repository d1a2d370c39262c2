package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// outRoot is the import path that stands for k8s.io/ in the generated packages: porting a
// plugin from k8s.io/api is changing this prefix of its imports.
const outRoot = "github.com/wasmrec/wasmrec/sdk/go/k8s/"

const (
	metaPkg  = "k8s.io/apimachinery/pkg/apis/meta/v1"
	codecPkg = "github.com/wasmrec/wasmrec/sdk/go/codec"
)

// special are the types whose JSON is not their fields' (they have MarshalJSON and
// UnmarshalJSON in k8s.io/apimachinery): written by hand in the package of the same path
// under outRoot, with DecodeJSON, EncodeJSON and DeepCopyInto methods. asString is a named
// string type, read and written as a string.
var special = map[string]struct{ asString, hasIsZero bool }{
	metaPkg + ".Time":                                   {hasIsZero: true},
	metaPkg + ".MicroTime":                              {hasIsZero: true},
	metaPkg + ".Duration":                               {},
	metaPkg + ".FieldsV1":                               {},
	"k8s.io/apimachinery/pkg/api/resource.Quantity":     {hasIsZero: true},
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString":   {},
	"k8s.io/apimachinery/pkg/runtime.RawExtension":      {},
	"k8s.io/apimachinery/pkg/types.UID":                 {asString: true},
	"k8s.io/apimachinery/pkg/types.NamespacedName":      {},
	"k8s.io/apimachinery/pkg/util/intstr.Type":          {},
	"k8s.io/apimachinery/pkg/api/resource.Format":       {asString: true},
	"k8s.io/apimachinery/pkg/apis/meta/v1.Fields":       {},
	"k8s.io/apimachinery/pkg/runtime.Unknown":           {},
	"k8s.io/apimachinery/pkg/apis/meta/v1.GroupVersion": {},
}

// extraMeta are meta/v1 types generated though no served kind reaches them: what controllers
// use about their objects.
var extraMeta = []string{"Condition", "ConditionStatus", "LabelSelector", "Preconditions", "DeletionPropagation"}

type gen struct {
	served *Served
	pkgs   map[string]*outPkg // by the k8s.io package path
	types  map[reflect.Type]bool
	docs   map[string]*pkgDocs // by the k8s.io package path
}

type outPkg struct {
	src     string // k8s.io/api/core/v1
	types   []reflect.Type
	kinds   []kindInfo
	imports map[string]bool // k8s.io package paths (mapped when written) and others
}

type kindInfo struct {
	t          reflect.Type
	apiVersion string
	kind       string
}

// outPath is where a k8s.io package's types are generated.
func outPath(src string) string { return outRoot + strings.TrimPrefix(src, "k8s.io/") }

// alias is the name a generated file imports a package by: k8s.io/api/apps/v1 is appsv1, as
// Kubernetes code names it.
func alias(src string) string {
	switch {
	case src == metaPkg:
		return "metav1"
	case strings.HasPrefix(src, "k8s.io/api/"):
		parts := strings.Split(strings.TrimPrefix(src, "k8s.io/api/"), "/")
		return strings.Join(parts, "")
	case src == codecPkg:
		return "codec"
	}
	return path.Base(src)
}

func generate(servedFile, outDir, kindsTest, scaffoldKinds string) error {
	data, err := os.ReadFile(servedFile)
	if err != nil {
		return err
	}
	g := &gen{served: &Served{}, pkgs: map[string]*outPkg{}, types: map[reflect.Type]bool{}, docs: map[string]*pkgDocs{}}
	if err := json.Unmarshal(data, g.served); err != nil {
		return fmt.Errorf("%s: %w", servedFile, err)
	}
	known := scheme.Scheme.AllKnownTypes()
	for _, k := range g.served.Kinds {
		gvk := schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
		t, ok := known[gvk]
		if !ok {
			continue // a kind of another group version with the same definition
		}
		if definition(t) != k.Definition {
			continue
		}
		p := g.pkg(t.PkgPath())
		if slices.ContainsFunc(p.kinds, func(k kindInfo) bool { return k.t == t }) {
			continue
		}
		p.kinds = append(p.kinds, kindInfo{t: t, apiVersion: gvk.GroupVersion().String(), kind: k.Kind})
		if err := g.reach(t); err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
	}
	for _, name := range extraMeta {
		t, ok := metaTypes[name]
		if !ok {
			return fmt.Errorf("no meta/v1 type %s", name)
		}
		if err := g.reach(t); err != nil {
			return err
		}
	}
	for _, p := range g.pkgs {
		slices.SortFunc(p.types, func(a, b reflect.Type) int { return strings.Compare(a.Name(), b.Name()) })
		slices.SortFunc(p.kinds, func(a, b kindInfo) int { return strings.Compare(a.kind, b.kind) })
		if err := g.check(p); err != nil {
			return err
		}
		if err := g.write(p, outDir); err != nil {
			return err
		}
	}
	if kindsTest != "" {
		if err := g.writeKindsTest(kindsTest); err != nil {
			return err
		}
	}
	if scaffoldKinds != "" {
		return g.writeScaffoldKinds(scaffoldKinds)
	}
	return nil
}

// writeScaffoldKinds writes, for wasmrec new, the package and alias of each generated kind.
func (g *gen) writeScaffoldKinds(name string) error {
	var b bytes.Buffer
	b.WriteString("// Code generated by typegen. DO NOT EDIT.\n\npackage scaffold\n\n")
	b.WriteString("// typedKinds are the kinds sdk/go/k8s has Go types of (\"apps/v1/Deployment\"), with the\n// package and the name it is imported by.\n")
	b.WriteString("var typedKinds = map[string]struct{ Import, Alias string }{\n")
	var keys []string
	lines := map[string]string{}
	for src, p := range g.pkgs {
		for _, k := range p.kinds {
			key := k.apiVersion + "/" + k.kind
			keys = append(keys, key)
			lines[key] = fmt.Sprintf("%q: {%q, %q},\n", key, outPath(src), alias(src))
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(lines[k])
	}
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		return err
	}
	return os.WriteFile(name, out, 0o644)
}

// writeKindsTest writes the list of every generated kind beside its k8s.io/api type, for
// typegen's own tests of the generated code against k8s.io/api and encoding/json.
func (g *gen) writeKindsTest(name string) error {
	var srcs []string
	for src := range g.pkgs {
		srcs = append(srcs, src)
	}
	slices.Sort(srcs)
	var b bytes.Buffer
	b.WriteString("// Code generated by typegen. DO NOT EDIT.\n\npackage main\n\nimport (\n")
	for _, src := range srcs {
		if len(g.pkgs[src].kinds) == 0 {
			continue
		}
		fmt.Fprintf(&b, "k8s%s %q\n", alias(src), src)
		fmt.Fprintf(&b, "%s %q\n", alias(src), outPath(src))
	}
	b.WriteString(")\n\nvar generatedKinds = []kindPair{\n")
	for _, src := range srcs {
		for _, k := range g.pkgs[src].kinds {
			a, n := alias(src), k.t.Name()
			fmt.Fprintf(&b, "{%q, func() any { return new(k8s%s.%s) }, func() object { return new(%s.%s) }},\n", k.apiVersion+"/"+k.kind, a, n, a, n)
		}
	}
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		return err
	}
	return os.WriteFile(name, out, 0o644)
}

// definition is the OpenAPI name of a k8s.io type: io.k8s.api.core.v1.ConfigMap.
func definition(t reflect.Type) string {
	p := t.PkgPath()
	switch {
	case strings.HasPrefix(p, "k8s.io/api/"):
		return "io.k8s.api." + strings.ReplaceAll(strings.TrimPrefix(p, "k8s.io/api/"), "/", ".") + "." + t.Name()
	case p == metaPkg:
		return "io.k8s.apimachinery.pkg.apis.meta.v1." + t.Name()
	}
	return ""
}

func (g *gen) pkg(src string) *outPkg {
	p, ok := g.pkgs[src]
	if !ok {
		p = &outPkg{src: src, imports: map[string]bool{}}
		g.pkgs[src] = p
	}
	return p
}

func generated(t reflect.Type) bool {
	p := t.PkgPath()
	return t.Name() != "" && (strings.HasPrefix(p, "k8s.io/api/") || p == metaPkg) && !isSpecial(t)
}

func isSpecial(t reflect.Type) bool {
	_, ok := special[t.PkgPath()+"."+t.Name()]
	return ok
}

// reach adds t and every type its fields hold to the packages to generate.
func (g *gen) reach(t reflect.Type) error {
	if t.Name() != "" && t.PkgPath() != "" {
		if isSpecial(t) {
			return nil
		}
		if !generated(t) {
			return fmt.Errorf("type %s.%s is outside k8s.io/api and has no hand-written counterpart", t.PkgPath(), t.Name())
		}
		if g.types[t] {
			return nil
		}
		g.types[t] = true
		p := g.pkg(t.PkgPath())
		p.types = append(p.types, t)
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || jsonName(f) == "-" {
				continue
			}
			if err := g.reach(f.Type); err != nil {
				return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
			}
		}
	case reflect.Pointer, reflect.Slice:
		return g.reach(t.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return fmt.Errorf("a map with %s keys: only string keys are generated for", t.Key())
		}
		if err := g.reach(t.Key()); err != nil {
			return err
		}
		return g.reach(t.Elem())
	case reflect.String, reflect.Bool, reflect.Int32, reflect.Int64, reflect.Int, reflect.Uint64, reflect.Float64, reflect.Uint8:
	default:
		return fmt.Errorf("cannot generate for a field of type %s (kind %s)", t, t.Kind())
	}
	return nil
}

func jsonTag(f reflect.StructField) (name string, opts []string) {
	tag := f.Tag.Get("json")
	name, rest, _ := strings.Cut(tag, ",")
	if rest != "" {
		opts = strings.Split(rest, ",")
	}
	return name, opts
}

func jsonName(f reflect.StructField) string {
	name, _ := jsonTag(f)
	if name == "" && !f.Anonymous {
		return f.Name
	}
	return name
}

// member is one JSON member of a struct: a field of it, or of a struct it embeds inline.
type member struct {
	json      string
	path      string // the Go selector from the struct: VolumeSource.ConfigMap
	t         reflect.Type
	omitempty bool
	omitzero  bool
}

// members lists t's JSON members in encoding/json's order, embedded inline structs flattened.
func members(t reflect.Type) ([]member, error) {
	type found struct {
		member
		depth int
	}
	var all []found
	var walk func(t reflect.Type, prefix string, depth int) error
	walk = func(t reflect.Type, prefix string, depth int) error {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts := jsonTag(f)
			if name == "-" && len(opts) == 0 {
				continue
			}
			if f.Anonymous && name == "" {
				if f.Type.Kind() != reflect.Struct {
					return fmt.Errorf("%s embeds %s inline: only structs are generated for", t.Name(), f.Type)
				}
				if err := walk(f.Type, prefix+f.Name+".", depth+1); err != nil {
					return err
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			all = append(all, found{member{json: name, path: prefix + f.Name, t: f.Type,
				omitempty: slices.Contains(opts, "omitempty"), omitzero: slices.Contains(opts, "omitzero")}, depth})
		}
		return nil
	}
	if err := walk(t, "", 0); err != nil {
		return nil, err
	}
	var out []member
	for i, f := range all {
		shadowed := false
		for j, o := range all {
			if i != j && o.json == f.json {
				if o.depth < f.depth {
					shadowed = true
				} else if o.depth == f.depth {
					return nil, fmt.Errorf("%s: two fields named %q at the same depth", t.Name(), f.json)
				}
			}
		}
		if !shadowed {
			out = append(out, f.member)
		}
	}
	return out, nil
}

// check compares each struct's JSON members with the OpenAPI definition's properties.
func (g *gen) check(p *outPkg) error {
	for _, t := range p.types {
		if t.Kind() != reflect.Struct {
			continue
		}
		props, ok := g.served.Properties[definition(t)]
		if !ok {
			continue // an inline struct (VolumeSource), which the OpenAPI does not name
		}
		ms, err := members(t)
		if err != nil {
			return err
		}
		var names []string
		for _, m := range ms {
			names = append(names, m.json)
		}
		slices.Sort(names)
		if !slices.Equal(names, props) {
			return fmt.Errorf("%s: k8s.io/api's fields %v are not the API server's %v", definition(t), names, props)
		}
	}
	return nil
}

// file is one generated file being written.
type file struct {
	g       *gen
	p       *outPkg
	buf     bytes.Buffer
	imports map[string]bool
	n       int // for fresh variable names
}

func (f *file) printf(format string, args ...any) { fmt.Fprintf(&f.buf, format, args...) }

func (f *file) fresh(prefix string) string {
	f.n++
	return fmt.Sprintf("%s%d", prefix, f.n)
}

// typeExpr is t as Go source in f's package.
func (f *file) typeExpr(t reflect.Type) string {
	if t.Name() != "" && t.PkgPath() != "" {
		if t.PkgPath() == f.p.src {
			return t.Name()
		}
		f.imports[t.PkgPath()] = true
		return alias(t.PkgPath()) + "." + t.Name()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + f.typeExpr(t.Elem())
	case reflect.Slice:
		return "[]" + f.typeExpr(t.Elem())
	case reflect.Map:
		return "map[" + f.typeExpr(t.Key()) + "]" + f.typeExpr(t.Elem())
	}
	return t.String() // a predeclared type
}

// underlyingExpr is t's underlying type as Go source: map[ResourceName]resource.Quantity for
// ResourceList.
func (f *file) underlyingExpr(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + f.typeExpr(t.Elem())
	case reflect.Slice:
		return "[]" + f.typeExpr(t.Elem())
	case reflect.Map:
		return "map[" + f.typeExpr(t.Key()) + "]" + f.typeExpr(t.Elem())
	}
	return t.Kind().String()
}

func (f *file) codec(name string) string {
	f.imports[codecPkg] = true
	return "codec." + name
}

// scalar is the codec function suffix of a scalar kind, or "".
func scalar(t reflect.Type) string {
	if isSpecial(t) && special[t.PkgPath()+"."+t.Name()].asString {
		return "String"
	}
	if isSpecial(t) {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "String"
	case reflect.Bool:
		return "Bool"
	case reflect.Int32:
		return "Int32"
	case reflect.Int64:
		return "Int64"
	case reflect.Int:
		return "Int"
	case reflect.Uint64:
		return "Uint64"
	case reflect.Float64:
		return "Float64"
	}
	return ""
}

func isBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

// readFunc is a func(*T, *codec.Decoder) reading a T.
func (f *file) readFunc(t reflect.Type) string {
	te := f.typeExpr(t)
	if s := scalar(t); s != "" {
		return f.codec("Read"+s) + "[" + te + "]"
	}
	if t.Kind() == reflect.Struct {
		return "(*" + te + ").DecodeJSON"
	}
	return "func(p *" + te + ", d *" + f.codec("Decoder") + ") {\n" + f.read(t, "p") + "}"
}

// read is a statement reading a T into the T that ptr (an expression of type *T) points to.
func (f *file) read(t reflect.Type, ptr string) string {
	if s := scalar(t); s != "" {
		return f.codec("Read"+s) + "(" + ptr + ", d)\n"
	}
	if isBytes(t) {
		if t.Name() != "" {
			ptr = "(*[]byte)(" + ptr + ")"
		}
		return f.codec("ReadBytes") + "(" + ptr + ", d)\n"
	}
	conv := func() string {
		if t.Name() != "" { // a named map or slice: the helpers take the type literal
			return "(*" + f.underlyingExpr(t) + ")(" + ptr + ")"
		}
		return ptr
	}
	switch t.Kind() {
	case reflect.Struct:
		return "(" + ptr + ").DecodeJSON(d)\n"
	case reflect.Pointer:
		return f.codec("ReadPtr") + "(" + conv() + ", d, " + f.readFunc(t.Elem()) + ")\n"
	case reflect.Slice:
		return f.codec("ReadSlice") + "(" + conv() + ", d, " + f.readFunc(t.Elem()) + ")\n"
	case reflect.Map:
		return f.codec("ReadMap") + "(" + conv() + ", d, " + f.readFunc(t.Elem()) + ")\n"
	}
	panic("read: " + t.String())
}

// writeFunc is a func(*T, *codec.Encoder) writing a T.
func (f *file) writeFunc(t reflect.Type) string {
	te := f.typeExpr(t)
	if s := scalar(t); s != "" {
		return f.codec("Write"+s) + "[" + te + "]"
	}
	if t.Kind() == reflect.Struct {
		return "(*" + te + ").EncodeJSON"
	}
	return "func(p *" + te + ", e *" + f.codec("Encoder") + ") {\n" + f.write(t, "p") + "}"
}

// write is a statement writing the T that ptr points to.
func (f *file) write(t reflect.Type, ptr string) string {
	if s := scalar(t); s != "" {
		return f.codec("Write"+s) + "(" + ptr + ", e)\n"
	}
	if isBytes(t) {
		return "e.Bytes64(*" + ptr + ")\n"
	}
	conv := func() string {
		if t.Name() != "" {
			return "(*" + f.underlyingExpr(t) + ")(" + ptr + ")"
		}
		return ptr
	}
	switch t.Kind() {
	case reflect.Struct:
		return "(" + ptr + ").EncodeJSON(e)\n"
	case reflect.Pointer:
		return f.codec("WritePtr") + "(" + conv() + ", e, " + f.writeFunc(t.Elem()) + ")\n"
	case reflect.Slice:
		return f.codec("WriteSlice") + "(" + conv() + ", e, " + f.writeFunc(t.Elem()) + ")\n"
	case reflect.Map:
		return f.codec("WriteMap") + "(" + conv() + ", e, " + f.writeFunc(t.Elem()) + ")\n"
	}
	panic("write: " + t.String())
}

// omitted is the condition under which a member is left out, or "" if it never is.
func (f *file) omitted(m member, v string) (string, error) {
	var conds []string
	if m.omitempty {
		switch m.t.Kind() {
		case reflect.String:
			conds = append(conds, v+` == ""`)
		case reflect.Bool:
			conds = append(conds, "!"+v)
		case reflect.Int32, reflect.Int64, reflect.Int, reflect.Uint64, reflect.Float64:
			conds = append(conds, v+" == 0")
		case reflect.Pointer:
			conds = append(conds, v+" == nil")
		case reflect.Slice, reflect.Map:
			conds = append(conds, "len("+v+") == 0")
		}
	}
	if m.omitzero {
		switch {
		case isSpecial(m.t) && special[m.t.PkgPath()+"."+m.t.Name()].hasIsZero:
			conds = append(conds, v+".IsZero()")
		case m.t.Kind() == reflect.Pointer:
			conds = append(conds, v+" == nil")
		default:
			return "", fmt.Errorf("omitzero on %s (%s): not generated for", m.path, m.t)
		}
	}
	return strings.Join(conds, " || "), nil
}

// needsCopy reports whether a T holds memory that a deep copy must not share.
func needsCopy(t reflect.Type) bool {
	if isSpecial(t) {
		return t.Kind() == reflect.Struct
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		return true
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() && needsCopy(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// deepCopy is a statement copying src into dst (both addressable expressions of type T).
func (f *file) deepCopy(t reflect.Type, dst, src string) string {
	if !needsCopy(t) {
		return dst + " = " + src + "\n"
	}
	switch t.Kind() {
	case reflect.Struct:
		return src + ".DeepCopyInto(&" + dst + ")\n"
	case reflect.Pointer:
		s := "if " + src + " == nil {\n" + dst + " = nil\n} else {\n" + dst + " = new(" + f.typeExpr(t.Elem()) + ")\n"
		return s + f.deepCopy(t.Elem(), "(*"+dst+")", "(*"+src+")") + "}\n"
	case reflect.Slice:
		s := "if " + src + " == nil {\n" + dst + " = nil\n} else {\n" + dst + " = make(" + f.typeExpr(t) + ", len(" + src + "))\n"
		if !needsCopy(t.Elem()) {
			return s + "copy(" + dst + ", " + src + ")\n}\n"
		}
		i := f.fresh("i")
		return s + "for " + i + " := range " + src + " {\n" + f.deepCopy(t.Elem(), dst+"["+i+"]", src+"["+i+"]") + "}\n}\n"
	case reflect.Map:
		k, v, c := f.fresh("k"), f.fresh("v"), f.fresh("c")
		s := "if " + src + " == nil {\n" + dst + " = nil\n} else {\n" + dst + " = make(" + f.typeExpr(t) + ", len(" + src + "))\n"
		s += "for " + k + ", " + v + " := range " + src + " {\n"
		if !needsCopy(t.Elem()) {
			return s + dst + "[" + k + "] = " + v + "\n}\n}\n"
		}
		s += "var " + c + " " + f.typeExpr(t.Elem()) + "\n" + f.deepCopy(t.Elem(), c, v)
		return s + dst + "[" + k + "] = " + c + "\n}\n}\n"
	}
	panic("deepCopy: " + t.String())
}

func (g *gen) write(p *outPkg, outDir string) error {
	dir := filepath.Join(outDir, strings.TrimPrefix(p.src, "k8s.io/"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	docs, err := g.docsOf(p.src)
	if err != nil {
		return err
	}
	header := "// Code generated by typegen from k8s.io/api v0.36.3, checked against the OpenAPI of " + g.served.Server + ". DO NOT EDIT.\n\n"

	// The types, their constants and the kinds' methods.
	tf := &file{g: g, p: p, imports: map[string]bool{}}
	for _, t := range p.types {
		if d := docs.types[t.Name()]; d != "" {
			tf.printf("%s", comment(d))
		}
		if t.Kind() != reflect.Struct {
			tf.printf("type %s %s\n\n", t.Name(), tf.underlyingExpr(t))
			for _, c := range docs.consts[t.Name()] {
				tf.printf("%s", c)
			}
			continue
		}
		tf.printf("type %s struct {\n", t.Name())
		for i := range t.NumField() {
			fd := t.Field(i)
			if !fd.IsExported() {
				continue
			}
			if d := docs.fields[t.Name()+"."+fd.Name]; d != "" {
				tf.printf("%s", comment(d))
			}
			tag := ""
			if j, ok := fd.Tag.Lookup("json"); ok {
				tag = " `json:\"" + j + "\"`"
			}
			if fd.Anonymous {
				tf.printf("%s%s\n", tf.typeExpr(fd.Type), tag)
			} else {
				tf.printf("%s %s%s\n", fd.Name, tf.typeExpr(fd.Type), tag)
			}
		}
		tf.printf("}\n\n")
	}
	if len(p.kinds) > 0 && p.src != metaPkg {
		gv := schemaGV(p.kinds[0].apiVersion)
		tf.imports["k8s.io/apimachinery/pkg/runtime/schema"] = true
		tf.printf("// GroupName is the API group of this package's kinds.\nconst GroupName = %q\n\n", gv[0])
		tf.printf("// SchemeGroupVersion is the group and version of this package's kinds.\nvar SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: %q}\n\n", gv[1])
	}
	for _, c := range docs.plain {
		if !strings.Contains(c, "const GroupName ") {
			tf.printf("%s", c)
		}
	}
	for _, k := range p.kinds {
		tf.imports["k8s.io/apimachinery/pkg/runtime"] = true
		tf.printf("// APIVersionKind is the apiVersion and kind of a %s.\n", k.t.Name())
		tf.printf("func (*%s) APIVersionKind() (apiVersion, kind string) { return %q, %q }\n\n", k.t.Name(), k.apiVersion, k.kind)
		tf.printf("// Reset makes x the zero %s, as a decode into it starts.\n", k.t.Name())
		tf.printf("func (x *%s) Reset() { *x = %s{} }\n\n", k.t.Name(), k.t.Name())
		if items, ok := k.t.FieldByName("Items"); ok && strings.HasSuffix(k.kind, "List") && items.Type.Kind() == reflect.Slice && items.Type.Elem().Kind() == reflect.Struct {
			tf.printf("// FilterItems keeps the items for which keep is true, in order.\n")
			tf.printf("func (x *%s) FilterItems(keep func(runtime.Object) bool) {\nn := 0\nfor i := range x.Items {\nif keep(&x.Items[i]) {\nx.Items[n] = x.Items[i]\nn++\n}\n}\nclear(x.Items[n:])\nx.Items = x.Items[:n]\n}\n\n", k.t.Name())
		}
		tf.printf("// DeepCopyObject is a deep copy of x.\n")
		tf.printf("func (x *%s) DeepCopyObject() runtime.Object {\nif c := x.DeepCopy(); c != nil {\nreturn c\n}\nreturn nil\n}\n\n", k.t.Name())
	}
	pkgDoc := "// Package " + path.Base(p.src) + " holds the Go types of " + p.src + " as " + g.served.Server + " serves them,\n" +
		"// with k8s.io/api's names, fields and JSON tags, for wasm plugins: import it where " + p.src + "\n" +
		"// was imported. Each type has a reflection-free JSON decoder and encoder (DecodeJSON, EncodeJSON,\n" +
		"// on package codec) and a deep copy; a plugin's module holds only the types it uses.\n"
	if p.src != metaPkg { // meta/v1's doc.go is written by hand
		doc := header + pkgDoc + "package " + path.Base(p.src) + "\n"
		if err := os.WriteFile(filepath.Join(dir, "doc.go"), []byte(doc), 0o644); err != nil {
			return err
		}
	}
	if err := tf.save(filepath.Join(dir, "zz_generated.types.go"), header, p); err != nil {
		return err
	}

	// The codecs.
	cf := &file{g: g, p: p, imports: map[string]bool{}}
	for _, t := range p.types {
		if t.Kind() != reflect.Struct {
			continue
		}
		ms, err := members(t)
		if err != nil {
			return err
		}
		cf.printf("// DecodeJSON reads a %s from d.\n", t.Name())
		cf.printf("func (x *%s) DecodeJSON(d *%s) {\nif !d.Object() {\nreturn\n}\n", t.Name(), cf.codec("Decoder"))
		cf.printf("for i := 0; ; i++ {\nk, ok := d.Member(i)\nif !ok {\nreturn\n}\nswitch k {\n")
		for _, m := range ms {
			cf.printf("case %q:\n%s", m.json, cf.read(m.t, "&x."+m.path))
		}
		cf.printf("default:\nd.Skip()\n}\n}\n}\n\n")

		cf.printf("// EncodeJSON writes x to e.\n")
		cf.printf("func (x *%s) EncodeJSON(e *%s) {\ne.BeginObject()\n", t.Name(), cf.codec("Encoder"))
		for _, m := range ms {
			key, _ := json.Marshal(m.json)
			w := "e.Key(`" + string(key) + ":`)\n" + cf.write(m.t, "&x."+m.path)
			cond, err := cf.omitted(m, "x."+m.path)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name(), err)
			}
			if cond != "" {
				cf.printf("if !(%s) {\n%s}\n", cond, w)
			} else {
				cf.printf("%s", w)
			}
		}
		cf.printf("e.EndObject()\n}\n\n")
	}
	if err := cf.save(filepath.Join(dir, "zz_generated.codec.go"), header, p); err != nil {
		return err
	}

	// The deep copies.
	df := &file{g: g, p: p, imports: map[string]bool{}}
	for _, t := range p.types {
		name := t.Name()
		df.printf("// DeepCopyInto copies x into out, sharing no memory with it.\n")
		df.printf("func (x *%s) DeepCopyInto(out *%s) {\n", name, name)
		switch {
		case t.Kind() == reflect.Struct:
			df.printf("*out = *x\n")
			for i := range t.NumField() {
				fd := t.Field(i)
				if fd.IsExported() && needsCopy(fd.Type) {
					df.printf("%s", df.deepCopy(fd.Type, "out."+fd.Name, "x."+fd.Name))
				}
			}
		case needsCopy(t):
			df.printf("%s", df.deepCopy(underlying(t), "(*(*"+df.underlyingExpr(t)+")(out))", "(*(*"+df.underlyingExpr(t)+")(x))"))
		default:
			df.printf("*out = *x\n")
		}
		df.printf("}\n\n")
		df.printf("// DeepCopy is a copy of x that shares no memory with it.\n")
		df.printf("func (x *%s) DeepCopy() *%s {\nif x == nil {\nreturn nil\n}\nout := new(%s)\nx.DeepCopyInto(out)\nreturn out\n}\n\n", name, name, name)
	}
	return df.save(filepath.Join(dir, "zz_generated.deepcopy.go"), header, p)
}

// schemaGV splits an apiVersion into its group and version.
func schemaGV(apiVersion string) [2]string {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return [2]string{"", apiVersion}
	}
	return [2]string{group, version}
}

// underlying is the unnamed type of a named map or slice type.
func underlying(t reflect.Type) reflect.Type {
	switch t.Kind() {
	case reflect.Map:
		return reflect.MapOf(t.Key(), t.Elem())
	case reflect.Slice:
		return reflect.SliceOf(t.Elem())
	case reflect.Pointer:
		return reflect.PointerTo(t.Elem())
	}
	return t
}

func (f *file) save(name, header string, p *outPkg) error {
	var out bytes.Buffer
	out.WriteString(header)
	fmt.Fprintf(&out, "package %s\n\n", path.Base(p.src))
	var imps []string
	for imp := range f.imports {
		imps = append(imps, imp)
	}
	slices.Sort(imps)
	if len(imps) > 0 {
		out.WriteString("import (\n")
		for _, imp := range imps {
			target := imp
			if strings.HasPrefix(imp, "k8s.io/") {
				target = outPath(imp)
			}
			fmt.Fprintf(&out, "%s %q\n", alias(imp), target)
		}
		out.WriteString(")\n\n")
	}
	out.Write(f.buf.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		_ = os.WriteFile(name+".broken", out.Bytes(), 0o644)
		return fmt.Errorf("%s: %w (the source is in %s.broken)", name, err, name)
	}
	return os.WriteFile(name, src, 0o644)
}

// comment is doc as // lines.
func comment(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(doc, "\n"), "\n") {
		b.WriteString("// " + l)
		b.WriteString("\n")
	}
	return strings.ReplaceAll(b.String(), "// \n", "//\n")
}

// goList is the directory of a package of this module's dependencies.
func goList(pkg string) (string, error) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w", pkg, err)
	}
	return strings.TrimSpace(string(out)), nil
}
