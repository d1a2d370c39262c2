package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"slices"
	"strings"
)

// CodecPath is package codec's import path, which the generated code calls.
const CodecPath = "github.com/wasmrec/wasmrec/sdk/go/codec"

// RuntimePath is the package of runtime.Object, which a kind's DeepCopyObject returns.
const RuntimePath = "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime"

// Kind is what a Type is made of.
type Kind uint8

const (
	Bool Kind = iota + 1
	Int
	Int32
	Int64
	Uint8
	Uint64
	Float64
	String
	Pointer
	Slice
	Map
	Struct
)

var kindNames = [...]string{Bool: "bool", Int: "int", Int32: "int32", Int64: "int64", Uint8: "uint8",
	Uint64: "uint64", Float64: "float64", String: "string", Pointer: "ptr", Slice: "slice", Map: "map", Struct: "struct"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Type is a Go type as the generator sees it.
type Type struct {
	Kind Kind
	// Pkg and Name are a named type's import path and name; both are empty for a type literal
	// or a predeclared type.
	Pkg, Name string
	Elem      *Type   // of a pointer, slice or map
	Key       *Type   // of a map
	Fields    []Field // of a struct
	// Given is a type whose methods are written elsewhere (by hand, or by another run of the
	// generator): its struct is read and written by its DecodeJSON and EncodeJSON and copied by
	// its DeepCopyInto; a named scalar is read as its kind. The generator does not look inside.
	Given bool
	// IsZero is a type with an IsZero() bool method, which omitzero calls.
	IsZero bool
	// Comparable is a struct that == compares.
	Comparable bool
}

// Named reports whether t is a named type declared in a package.
func (t *Type) Named() bool { return t.Name != "" && t.Pkg != "" }

// String is t as a reader names it: k8s.io/api/core/v1.Pod, []string.
func (t *Type) String() string {
	if t.Named() {
		return t.Pkg + "." + t.Name
	}
	switch t.Kind {
	case Pointer:
		return "*" + t.Elem.String()
	case Slice:
		return "[]" + t.Elem.String()
	case Map:
		return "map[" + t.Key.String() + "]" + t.Elem.String()
	case Struct:
		return "struct{...}"
	}
	return t.Kind.String()
}

// Field is a struct's field.
type Field struct {
	Name     string
	Type     *Type
	Tag      string // the json tag's value
	HasTag   bool   // there is a json tag
	Embedded bool
	Exported bool
	// PatchStrategy and PatchMergeKey are the patchStrategy and patchMergeKey tags k8s.io/api
	// gives a field: how a strategic merge patch merges it.
	PatchStrategy, PatchMergeKey string
}

// Check reports the first part of t that the generator cannot write code for, naming the field
// that holds it.
func Check(t *Type) error {
	seen := map[*Type]bool{}
	var walk func(t *Type) error
	walk = func(t *Type) error {
		if seen[t] {
			return nil
		}
		seen[t] = true
		if t.Given {
			if t.Kind == Struct || scalar(t) != "" {
				return nil
			}
		}
		switch t.Kind {
		case Struct:
			if _, err := Members(t); err != nil {
				return err
			}
			for _, f := range t.Fields {
				if !f.Exported || jsonName(f) == "-" {
					continue
				}
				if err := walk(f.Type); err != nil {
					return fmt.Errorf("%s.%s: %w", nameOf(t), f.Name, err)
				}
			}
		case Pointer, Slice:
			return walk(t.Elem)
		case Map:
			if t.Key.Kind != String {
				return fmt.Errorf("a map with %s keys: only string keys are generated for", t.Key)
			}
			return walk(t.Elem)
		case Bool, Int, Int32, Int64, Uint8, Uint64, Float64, String:
		default:
			return fmt.Errorf("cannot generate for a field of type %s", t)
		}
		return nil
	}
	return walk(t)
}

func nameOf(t *Type) string {
	if t.Name != "" {
		return t.Name
	}
	return t.String()
}

// JSONTag splits a field's json tag into its name and options.
func JSONTag(f Field) (name string, opts []string) {
	name, rest, _ := strings.Cut(f.Tag, ",")
	if rest != "" {
		opts = strings.Split(rest, ",")
	}
	return name, opts
}

func jsonName(f Field) string {
	name, _ := JSONTag(f)
	if name == "" && !f.Embedded {
		return f.Name
	}
	return name
}

// Member is one JSON member of a struct: a field of it, or of a struct it embeds inline.
type Member struct {
	JSON      string
	Path      string // the Go selector from the struct: VolumeSource.ConfigMap
	Type      *Type
	OmitEmpty bool
	OmitZero  bool
	// PatchStrategy and PatchMergeKey are the field's.
	PatchStrategy, PatchMergeKey string
}

// Members lists t's JSON members in encoding/json's order, embedded inline structs flattened.
func Members(t *Type) ([]Member, error) {
	type found struct {
		Member
		depth int
	}
	var all []found
	var walk func(t *Type, prefix string, depth int) error
	walk = func(t *Type, prefix string, depth int) error {
		for _, f := range t.Fields {
			name, opts := JSONTag(f)
			if name == "-" && len(opts) == 0 {
				continue
			}
			if f.Embedded && name == "" {
				if f.Type.Kind != Struct {
					return fmt.Errorf("%s embeds %s inline: only structs are generated for", nameOf(t), f.Type)
				}
				if err := walk(f.Type, prefix+f.Name+".", depth+1); err != nil {
					return err
				}
				continue
			}
			if !f.Exported {
				continue
			}
			if name == "" {
				name = f.Name
			}
			all = append(all, found{Member{JSON: name, Path: prefix + f.Name, Type: f.Type,
				OmitEmpty: slices.Contains(opts, "omitempty"), OmitZero: slices.Contains(opts, "omitzero"),
				PatchStrategy: f.PatchStrategy, PatchMergeKey: f.PatchMergeKey}, depth})
		}
		return nil
	}
	if err := walk(t, "", 0); err != nil {
		return nil, err
	}
	var out []Member
	for i, f := range all {
		shadowed := false
		for j, o := range all {
			if i != j && o.JSON == f.JSON {
				if o.depth < f.depth {
					shadowed = true
				} else if o.depth == f.depth {
					return nil, fmt.Errorf("%s: two fields named %q at the same depth", nameOf(t), f.JSON)
				}
			}
		}
		if !shadowed {
			out = append(out, f.Member)
		}
	}
	return out, nil
}

// File is one generated file being written, in the package whose import path is Pkg.
type File struct {
	pkg     string
	alias   func(path string) string
	buf     bytes.Buffer
	imports map[string]bool
	n       int // for fresh variable names
}

// NewFile starts a file of the package at import path pkg, which imports a package by the name
// alias gives it.
func NewFile(pkg string, alias func(path string) string) *File {
	return &File{pkg: pkg, alias: alias, imports: map[string]bool{}}
}

// Printf adds to the file's body.
func (f *File) Printf(format string, args ...any) { fmt.Fprintf(&f.buf, format, args...) }

// Import records that the file imports path and is the name it refers to it by.
func (f *File) Import(path string) string {
	f.imports[path] = true
	return f.alias(path)
}

// Source is the file, formatted: header (its comment), the package clause, the imports and
// the body. A body that does not format is returned whole with the error.
func (f *File) Source(header, pkgName string) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(header)
	fmt.Fprintf(&out, "package %s\n\n", pkgName)
	imps := make([]string, 0, len(f.imports))
	for imp := range f.imports {
		imps = append(imps, imp)
	}
	slices.Sort(imps)
	if len(imps) > 0 {
		out.WriteString("import (\n")
		for _, imp := range imps {
			fmt.Fprintf(&out, "%s %q\n", f.alias(imp), imp)
		}
		out.WriteString(")\n\n")
	}
	out.Write(f.buf.Bytes())
	src, err := format.Source(out.Bytes())
	if err != nil {
		return out.Bytes(), err
	}
	return src, nil
}

func (f *File) fresh(prefix string) string {
	f.n++
	return fmt.Sprintf("%s%d", prefix, f.n)
}

// TypeExpr is t as Go source in f's package.
func (f *File) TypeExpr(t *Type) string {
	if t.Named() {
		if t.Pkg == f.pkg {
			return t.Name
		}
		return f.Import(t.Pkg) + "." + t.Name
	}
	return f.UnderlyingExpr(t)
}

// UnderlyingExpr is t's underlying type as Go source: map[ResourceName]resource.Quantity for
// ResourceList.
func (f *File) UnderlyingExpr(t *Type) string {
	switch t.Kind {
	case Pointer:
		return "*" + f.TypeExpr(t.Elem)
	case Slice:
		return "[]" + f.TypeExpr(t.Elem)
	case Map:
		return "map[" + f.TypeExpr(t.Key) + "]" + f.TypeExpr(t.Elem)
	}
	return t.Kind.String() // a predeclared type
}

func (f *File) codec(name string) string { return f.Import(CodecPath) + "." + name }

// scalar is the codec function suffix of a scalar kind, or "".
func scalar(t *Type) string {
	switch t.Kind {
	case String:
		return "String"
	case Bool:
		return "Bool"
	case Int32:
		return "Int32"
	case Int64:
		return "Int64"
	case Int:
		return "Int"
	case Uint64:
		return "Uint64"
	case Float64:
		return "Float64"
	}
	return ""
}

// plainString is the predeclared string type.
func plainString(t *Type) bool { return t.Kind == String && !t.Named() }

func isBytes(t *Type) bool { return t.Kind == Slice && t.Elem.Kind == Uint8 && !t.Elem.Named() }

// direction is what reading or writing a value calls: read, with a *codec.Decoder named d and
// the methods DecodeJSON, or write, with a *codec.Encoder named e and EncodeJSON.
type direction struct {
	verb, coder, arg, method string // Read, Decoder, d, DecodeJSON
}

var (
	reading = direction{"Read", "Decoder", "d", "DecodeJSON"}
	writing = direction{"Write", "Encoder", "e", "EncodeJSON"}
)

// fn is a func(*T, *codec.Decoder) reading a T, or a func(*T, *codec.Encoder) writing one.
func (f *File) fn(dir direction, t *Type) string {
	te := f.TypeExpr(t)
	if s := scalar(t); s != "" {
		return f.codec(dir.verb+s) + "[" + te + "]"
	}
	if t.Kind == Struct {
		return "(*" + te + ")." + dir.method
	}
	return "func(p *" + te + ", " + dir.arg + " *" + f.codec(dir.coder) + ") {\n" + f.stmt(dir, t, "p") + "}"
}

// stmt is a statement reading a T into the T that ptr (an expression of type *T) points to, or
// writing the T it points to.
func (f *File) stmt(dir direction, t *Type, ptr string) string {
	if s := scalar(t); s != "" {
		return f.codec(dir.verb+s) + "(" + ptr + ", " + dir.arg + ")\n"
	}
	if isBytes(t) {
		if dir == writing {
			return "e.Bytes64(*" + ptr + ")\n"
		}
		if t.Name != "" {
			ptr = "(*[]byte)(" + ptr + ")"
		}
		return f.codec("ReadBytes") + "(" + ptr + ", d)\n"
	}
	if t.Kind == Struct {
		return "(" + ptr + ")." + dir.method + "(" + dir.arg + ")\n"
	}
	if t.Name != "" { // a named map, slice or pointer: the helpers take the type literal
		ptr = "(*" + f.UnderlyingExpr(t) + ")(" + ptr + ")"
	}
	if dir == reading && t.Kind == Map && plainString(t.Key) && plainString(t.Elem) {
		return f.codec("ReadStringMap") + "(" + ptr + ", d)\n"
	}
	var helper string
	switch t.Kind {
	case Pointer:
		helper = "Ptr"
	case Slice:
		helper = "Slice"
	case Map:
		helper = "Map"
	default:
		panic("gen: " + dir.verb + " of " + t.String())
	}
	return f.codec(dir.verb+helper) + "(" + ptr + ", " + dir.arg + ", " + f.fn(dir, t.Elem) + ")\n"
}

// empty is the condition under which omitempty leaves out v, of type t, or "" if it never does.
func empty(t *Type, v string) string {
	switch t.Kind {
	case String:
		return v + ` == ""`
	case Bool:
		return "!" + v
	case Int32, Int64, Int, Uint8, Uint64, Float64:
		return v + " == 0"
	case Pointer:
		return v + " == nil"
	case Slice, Map:
		return "len(" + v + ") == 0"
	}
	return ""
}

// zero is the condition under which v, of type t, is its type's zero value, as omitzero
// decides it: by t's IsZero method if it has one, else field by field.
func (f *File) zero(t *Type, v string) (string, error) {
	switch {
	case t.IsZero:
		return v + ".IsZero()", nil
	case t.Kind == 0:
		return "", fmt.Errorf("omitzero on a %s, which has no IsZero method and whose fields are not known", t)
	case t.Kind == Struct && t.Comparable:
		return v + " == (" + f.TypeExpr(t) + "{})", nil
	case t.Kind == Struct:
		if t.Given && len(t.Fields) == 0 {
			return "", fmt.Errorf("omitzero on a %s, which has no IsZero method and whose fields are not known", t)
		}
		var conds []string
		for _, fd := range t.Fields {
			if !fd.Exported {
				return "", fmt.Errorf("omitzero on a %s, which has no IsZero method and has unexported fields", t)
			}
			c, err := f.zero(fd.Type, v+"."+fd.Name)
			if err != nil {
				return "", err
			}
			conds = append(conds, "("+c+")")
		}
		if len(conds) == 0 {
			return "true", nil
		}
		return strings.Join(conds, " && "), nil
	case t.Kind == Slice || t.Kind == Map || t.Kind == Pointer:
		return v + " == nil", nil
	}
	return empty(t, v), nil
}

// omitted is the condition under which a member is left out, or "" if it never is.
func (f *File) omitted(m Member, v string) (string, error) {
	var conds []string
	if m.OmitEmpty {
		if c := empty(m.Type, v); c != "" {
			conds = append(conds, c)
		}
	}
	if m.OmitZero {
		c, err := f.zero(m.Type, v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", m.Path, err)
		}
		conds = append(conds, c)
	}
	return strings.Join(conds, " || "), nil
}

// Codecs writes DecodeJSON and EncodeJSON for each struct of types.
func (f *File) Codecs(types []*Type) error {
	for _, t := range types {
		if t.Kind != Struct {
			continue
		}
		ms, err := Members(t)
		if err != nil {
			return err
		}
		f.Printf("// DecodeJSON reads a %s from d.\n", t.Name)
		f.Printf("func (x *%s) DecodeJSON(d *%s) {\nif !d.Object() {\nreturn\n}\n", t.Name, f.codec("Decoder"))
		f.Printf("for i := 0; ; i++ {\nk, ok := d.Member(i)\nif !ok {\nreturn\n}\nswitch k {\n")
		for _, m := range ms {
			f.Printf("case %q:\n%s", m.JSON, f.stmt(reading, m.Type, "&x."+m.Path))
		}
		f.Printf("default:\nd.Skip()\n}\n}\n}\n\n")

		f.Printf("// EncodeJSON writes x to e.\n")
		f.Printf("func (x *%s) EncodeJSON(e *%s) {\ne.BeginObject()\n", t.Name, f.codec("Encoder"))
		for _, m := range ms {
			key, _ := json.Marshal(m.JSON)
			w := "e.Key(`" + string(key) + ":`)\n" + f.stmt(writing, m.Type, "&x."+m.Path)
			cond, err := f.omitted(m, "x."+m.Path)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
			if cond != "" {
				f.Printf("if !(%s) {\n%s}\n", cond, w)
			} else {
				f.Printf("%s", w)
			}
		}
		f.Printf("e.EndObject()\n}\n\n")
	}
	return nil
}

// needsCopy reports whether a T holds memory that a deep copy must not share.
func needsCopy(t *Type) bool {
	if t.Given {
		return t.Kind == Struct
	}
	switch t.Kind {
	case Pointer, Slice, Map:
		return true
	case Struct:
		for _, f := range t.Fields {
			if f.Exported && needsCopy(f.Type) {
				return true
			}
		}
	}
	return false
}

// deepCopy is a statement copying src into dst (both addressable expressions of type T).
func (f *File) deepCopy(t *Type, dst, src string) string {
	if !needsCopy(t) {
		return dst + " = " + src + "\n"
	}
	switch t.Kind {
	case Struct:
		return src + ".DeepCopyInto(&" + dst + ")\n"
	case Pointer:
		s := "if " + src + " == nil {\n" + dst + " = nil\n} else {\n" + dst + " = new(" + f.TypeExpr(t.Elem) + ")\n"
		return s + f.deepCopy(t.Elem, "(*"+dst+")", "(*"+src+")") + "}\n"
	case Slice:
		s := "if " + src + " == nil {\n" + dst + " = nil\n} else {\n" + dst + " = make(" + f.TypeExpr(t) + ", len(" + src + "))\n"
		if !needsCopy(t.Elem) {
			return s + "copy(" + dst + ", " + src + ")\n}\n"
		}
		i := f.fresh("i")
		return s + "for " + i + " := range " + src + " {\n" + f.deepCopy(t.Elem, dst+"["+i+"]", src+"["+i+"]") + "}\n}\n"
	case Map:
		k, v, c := f.fresh("k"), f.fresh("v"), f.fresh("c")
		s := "if " + src + " == nil {\n" + dst + " = nil\n} else {\n" + dst + " = make(" + f.TypeExpr(t) + ", len(" + src + "))\n"
		s += "for " + k + ", " + v + " := range " + src + " {\n"
		if !needsCopy(t.Elem) {
			return s + dst + "[" + k + "] = " + v + "\n}\n}\n"
		}
		s += "var " + c + " " + f.TypeExpr(t.Elem) + "\n" + f.deepCopy(t.Elem, c, v)
		return s + dst + "[" + k + "] = " + c + "\n}\n}\n"
	}
	panic("gen: deep copy of " + t.String())
}

// unnamed is the type literal of a named map, slice or pointer type.
func unnamed(t *Type) *Type {
	switch t.Kind {
	case Map, Slice, Pointer:
		return &Type{Kind: t.Kind, Elem: t.Elem, Key: t.Key}
	}
	return t
}

// DeepCopies writes DeepCopyInto and DeepCopy for each of types.
func (f *File) DeepCopies(types []*Type) {
	for _, t := range types {
		name := t.Name
		f.Printf("// DeepCopyInto copies x into out, sharing no memory with it.\n")
		f.Printf("func (x *%s) DeepCopyInto(out *%s) {\n", name, name)
		switch {
		case t.Kind == Struct:
			f.Printf("*out = *x\n")
			for _, fd := range t.Fields {
				if fd.Exported && needsCopy(fd.Type) {
					f.Printf("%s", f.deepCopy(fd.Type, "out."+fd.Name, "x."+fd.Name))
				}
			}
		case needsCopy(t):
			u := f.UnderlyingExpr(t)
			f.Printf("%s", f.deepCopy(unnamed(t), "(*(*"+u+")(out))", "(*(*"+u+")(x))"))
		default:
			f.Printf("*out = *x\n")
		}
		f.Printf("}\n\n")
		f.Printf("// DeepCopy is a copy of x that shares no memory with it.\n")
		f.Printf("func (x *%s) DeepCopy() *%s {\nif x == nil {\nreturn nil\n}\nout := new(%s)\nx.DeepCopyInto(out)\nreturn out\n}\n\n", name, name, name)
	}
}

// Root is a kind: a type that is a whole API object, or a list of them.
type Root struct {
	Type       *Type
	APIVersion string // batch/v1
	Kind       string // CronJob
}

// KindMethods writes each root's APIVersionKind, Reset and DeepCopyObject, and a list's
// FilterItems.
func (f *File) KindMethods(roots []Root) {
	for _, k := range roots {
		name := k.Type.Name
		runtime := f.Import(RuntimePath)
		f.Printf("// APIVersionKind is the apiVersion and kind of a %s.\n", name)
		f.Printf("func (*%s) APIVersionKind() (apiVersion, kind string) { return %q, %q }\n\n", name, k.APIVersion, k.Kind)
		f.Printf("// Reset makes x the zero %s, as a decode into it starts.\n", name)
		f.Printf("func (x *%s) Reset() { *x = %s{} }\n\n", name, name)
		if items := fieldNamed(k.Type, "Items"); items != nil && strings.HasSuffix(k.Kind, "List") && items.Kind == Slice && items.Elem.Kind == Struct {
			f.Printf("// FilterItems keeps the items for which keep is true, in order.\n")
			f.Printf("func (x *%s) FilterItems(keep func(%s.Object) bool) {\nn := 0\nfor i := range x.Items {\nif keep(&x.Items[i]) {\nx.Items[n] = x.Items[i]\nn++\n}\n}\nclear(x.Items[n:])\nx.Items = x.Items[:n]\n}\n\n", name, runtime)
		}
		f.Printf("// DeepCopyObject is a deep copy of x.\n")
		f.Printf("func (x *%s) DeepCopyObject() %s.Object {\nif c := x.DeepCopy(); c != nil {\nreturn c\n}\nreturn nil\n}\n\n", name, runtime)
	}
}

func fieldNamed(t *Type, name string) *Type {
	for _, f := range t.Fields {
		if f.Name == name {
			return f.Type
		}
	}
	return nil
}

// PatchFieldsMethods writes PatchField (codec.PatchFields) for each struct of types: for each
// JSON member whose value is an object or an array, its patch strategy, merge key, and the
// PatchFields of its value's struct type. The method is linked into a module only where a
// strategic merge patch is computed.
func (f *File) PatchFieldsMethods(types []*Type) error {
	for _, t := range types {
		if t.Kind != Struct || t.Given {
			continue
		}
		ms, err := Members(t)
		if err != nil {
			return err
		}
		// A struct embedded inline whose members all stand in t, none shadowed, is asked
		// through its own PatchField rather than written out again (a Volume's VolumeSource).
		delegated := map[string]*Type{}
		var embeds []string
		for _, fd := range t.Fields {
			if name, _ := JSONTag(fd); !fd.Embedded || name != "" || fd.Type.Kind != Struct || fd.Type.Given {
				continue
			}
			own, err := Members(fd.Type)
			if err != nil {
				return err
			}
			n, all := 0, 0
			for _, m := range own {
				if _, ok := f.patchValue(m.Type); ok {
					all++
				}
			}
			for _, m := range ms {
				if _, ok := f.patchValue(m.Type); ok && strings.HasPrefix(m.Path, fd.Name+".") {
					n++
				}
			}
			if all > 0 && n == all {
				delegated[fd.Name] = fd.Type
				embeds = append(embeds, fd.Name)
			}
		}
		pf := f.codec("PatchFields")
		f.Printf("// PatchField is how a strategic merge patch merges the member name of a %s.\n", t.Name)
		f.Printf("func (*%s) PatchField(name string) (strategy, mergeKey string, value %s, ok bool) {\n", t.Name, pf)
		var cases strings.Builder
		for _, m := range ms {
			value, ok := f.patchValue(m.Type)
			if !ok {
				continue // a string, number or bool in JSON
			}
			if first, _, inline := strings.Cut(m.Path, "."); inline && delegated[first] != nil {
				continue
			}
			fmt.Fprintf(&cases, "case %q:\nreturn %q, %q, %s, true\n", m.JSON, m.PatchStrategy, m.PatchMergeKey, value)
		}
		if cases.Len() > 0 {
			f.Printf("switch name {\n%s}\n", cases.String())
		}
		for _, e := range embeds {
			f.Printf("if s, k, v, ok := (*%s)(nil).PatchField(name); ok {\nreturn s, k, v, ok\n}\n", f.TypeExpr(delegated[e]))
		}
		f.Printf("return \"\", \"\", nil, false\n}\n\n")
	}
	return nil
}

// patchValue is what PatchField says of a member of type t: the PatchFields of its value's
// struct type (of a list's items), "nil" where that is not a generated struct; ok is false
// for a member that is a string, number or bool in JSON, which PatchField leaves out.
func (f *File) patchValue(t *Type) (value string, ok bool) {
	for t.Kind == Pointer {
		t = t.Elem
	}
	if t.Kind == Slice && !isBytes(t) {
		t = t.Elem
		for t.Kind == Pointer {
			t = t.Elem
		}
	} else if t.Kind != Map && t.Kind != Struct {
		return "", false
	}
	if t.Kind == Struct && !t.Given {
		return "(*" + f.TypeExpr(t) + ")(nil)", true
	}
	return "nil", true
}
