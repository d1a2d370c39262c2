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
	"strconv"
	"strings"

	codegen "github.com/wasmrec/wasmrec/sdk/go/codec/gen"
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
	// described are the types as package codegen describes them.
	described map[reflect.Type]*codegen.Type
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

func generate(servedFile, outDir, kindsTest, scaffoldKinds, fakePatchMeta string) error {
	data, err := os.ReadFile(servedFile)
	if err != nil {
		return err
	}
	g := &gen{served: &Served{}, pkgs: map[string]*outPkg{}, types: map[reflect.Type]bool{}, docs: map[string]*pkgDocs{}, described: map[reflect.Type]*codegen.Type{}}
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
	if fakePatchMeta != "" {
		if err := g.writePatchMeta(fakePatchMeta); err != nil {
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

// jsonName is the JSON name a field has, "" for an embedded struct read inline.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" && !f.Anonymous {
		return f.Name
	}
	return name
}

var kinds = map[reflect.Kind]codegen.Kind{
	reflect.Bool: codegen.Bool, reflect.Int: codegen.Int, reflect.Int32: codegen.Int32, reflect.Int64: codegen.Int64,
	reflect.Uint8: codegen.Uint8, reflect.Uint64: codegen.Uint64, reflect.Float64: codegen.Float64, reflect.String: codegen.String,
	reflect.Pointer: codegen.Pointer, reflect.Slice: codegen.Slice, reflect.Map: codegen.Map, reflect.Struct: codegen.Struct,
}

// model is t as package codegen describes it, with k8s.io's packages at their paths under outRoot.
func (g *gen) model(t reflect.Type) *codegen.Type {
	if m, ok := g.described[t]; ok {
		return m
	}
	m := &codegen.Type{Kind: kinds[t.Kind()]}
	g.described[t] = m
	if t.Name() != "" && t.PkgPath() != "" {
		m.Name, m.Pkg = t.Name(), t.PkgPath()
		if strings.HasPrefix(m.Pkg, "k8s.io/") {
			m.Pkg = outPath(m.Pkg)
		}
		m.Given = isSpecial(t)
		m.IsZero = special[t.PkgPath()+"."+t.Name()].hasIsZero
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		m.Elem = g.model(t.Elem())
	case reflect.Map:
		m.Key, m.Elem = g.model(t.Key()), g.model(t.Elem())
	case reflect.Struct:
		m.Comparable = t.Comparable()
		for i := range t.NumField() {
			f := t.Field(i)
			tag, ok := f.Tag.Lookup("json")
			m.Fields = append(m.Fields, codegen.Field{Name: f.Name, Type: g.model(f.Type), Tag: tag, HasTag: ok,
				Embedded: f.Anonymous, Exported: f.IsExported(),
				PatchStrategy: f.Tag.Get("patchStrategy"), PatchMergeKey: f.Tag.Get("patchMergeKey")})
		}
	}
	return m
}

func (g *gen) models(ts []reflect.Type) []*codegen.Type {
	out := make([]*codegen.Type, len(ts))
	for i, t := range ts {
		out[i] = g.model(t)
	}
	return out
}

// newFile starts a generated file of p.
func (g *gen) newFile(p *outPkg) *codegen.File {
	return codegen.NewFile(outPath(p.src), func(imp string) string {
		if rest, ok := strings.CutPrefix(imp, outRoot); ok {
			return alias("k8s.io/" + rest)
		}
		return alias(imp)
	})
}

func save(f *codegen.File, name, header string, p *outPkg) error {
	src, err := f.Source(header, path.Base(p.src))
	if err != nil {
		_ = os.WriteFile(name+".broken", src, 0o644)
		return fmt.Errorf("%s: %w (the source is in %s.broken)", name, err, name)
	}
	return os.WriteFile(name, src, 0o644)
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
		ms, err := codegen.Members(g.model(t))
		if err != nil {
			return err
		}
		var names []string
		for _, m := range ms {
			names = append(names, m.JSON)
		}
		slices.Sort(names)
		if !slices.Equal(names, props) {
			return fmt.Errorf("%s: k8s.io/api's fields %v are not the API server's %v", definition(t), names, props)
		}
	}
	return nil
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
	tf := g.newFile(p)
	for _, t := range p.types {
		if d := docs.types[t.Name()]; d != "" {
			tf.Printf("%s", comment(d))
		}
		if t.Kind() != reflect.Struct {
			tf.Printf("type %s %s\n\n", t.Name(), tf.UnderlyingExpr(g.model(t)))
			for _, c := range docs.consts[t.Name()] {
				tf.Printf("%s", c)
			}
			continue
		}
		tf.Printf("type %s struct {\n", t.Name())
		for i := range t.NumField() {
			fd := t.Field(i)
			if !fd.IsExported() {
				continue
			}
			if d := docs.fields[t.Name()+"."+fd.Name]; d != "" {
				tf.Printf("%s", comment(d))
			}
			var tags []string
			for _, key := range []string{"json", "patchStrategy", "patchMergeKey"} {
				if v, ok := fd.Tag.Lookup(key); ok {
					tags = append(tags, key+":"+strconv.Quote(v))
				}
			}
			tag := ""
			if len(tags) > 0 {
				tag = " `" + strings.Join(tags, " ") + "`"
			}
			if fd.Anonymous {
				tf.Printf("%s%s\n", tf.TypeExpr(g.model(fd.Type)), tag)
			} else {
				tf.Printf("%s %s%s\n", fd.Name, tf.TypeExpr(g.model(fd.Type)), tag)
			}
		}
		tf.Printf("}\n\n")
	}
	if len(p.kinds) > 0 && p.src != metaPkg {
		gv := schemaGV(p.kinds[0].apiVersion)
		tf.Import(outPath("k8s.io/apimachinery/pkg/runtime/schema"))
		tf.Printf("// GroupName is the API group of this package's kinds.\nconst GroupName = %q\n\n", gv[0])
		tf.Printf("// SchemeGroupVersion is the group and version of this package's kinds.\nvar SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: %q}\n\n", gv[1])
	}
	for _, c := range docs.plain {
		if !strings.Contains(c, "const GroupName ") {
			tf.Printf("%s", c)
		}
	}
	if h, ok := handWritten[p.src]; ok {
		for _, imp := range h.imports {
			tf.Import(outPath(imp))
		}
		tf.Printf("%s", h.code)
	}
	var roots []codegen.Root
	for _, k := range p.kinds {
		roots = append(roots, codegen.Root{Type: g.model(k.t), APIVersion: k.apiVersion, Kind: k.kind})
	}
	tf.KindMethods(roots)
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
	if err := save(tf, filepath.Join(dir, "zz_generated.types.go"), header, p); err != nil {
		return err
	}

	// The codecs.
	cf := g.newFile(p)
	if err := cf.Codecs(g.models(p.types)); err != nil {
		return err
	}
	if err := save(cf, filepath.Join(dir, "zz_generated.codec.go"), header, p); err != nil {
		return err
	}

	// How strategic merge patches merge the structs' members.
	pf := g.newFile(p)
	if err := pf.PatchFieldsMethods(g.models(p.types)); err != nil {
		return err
	}
	if err := save(pf, filepath.Join(dir, "zz_generated.patchfields.go"), header, p); err != nil {
		return err
	}

	// The deep copies.
	df := g.newFile(p)
	df.DeepCopies(g.models(p.types))
	return save(df, filepath.Join(dir, "zz_generated.deepcopy.go"), header, p)
}

// schemaGV splits an apiVersion into its group and version.
func schemaGV(apiVersion string) [2]string {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return [2]string{"", apiVersion}
	}
	return [2]string{group, version}
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
