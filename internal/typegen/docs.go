package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metaTypes are the meta/v1 types extraMeta may name.
var metaTypes = map[string]reflect.Type{
	"Condition":           reflect.TypeFor[metav1.Condition](),
	"ConditionStatus":     reflect.TypeFor[metav1.ConditionStatus](),
	"LabelSelector":       reflect.TypeFor[metav1.LabelSelector](),
	"Preconditions":       reflect.TypeFor[metav1.Preconditions](),
	"DeletionPropagation": reflect.TypeFor[metav1.DeletionPropagation](),
}

// pkgDocs is what a generated package copies from its k8s.io source: the types' and fields'
// doc comments, and the constants of each named type.
type pkgDocs struct {
	types  map[string]string
	fields map[string]string   // Type.Field
	consts map[string][]string // by type: declarations, with their docs
	// plain are the constants that are untyped or of a predeclared type (EventTypeNormal,
	// NamespaceDefault): declarations, with their docs.
	plain []string
}

func (g *gen) docsOf(pkg string) (*pkgDocs, error) {
	if d, ok := g.docs[pkg]; ok {
		return d, nil
	}
	dir, err := goList(pkg)
	if err != nil {
		return nil, err
	}
	d := &pkgDocs{types: map[string]string{}, fields: map[string]string{}, consts: map[string][]string{}}
	g.docs[pkg] = d
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "zz_generated") || strings.HasPrefix(n, "generated") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.TYPE:
				for _, s := range gd.Specs {
					ts := s.(*ast.TypeSpec)
					doc := ts.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					d.types[ts.Name.Name] = clean(doc)
					if st, ok := ts.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, name := range fl.Names {
								d.fields[ts.Name.Name+"."+name.Name] = clean(fl.Doc)
							}
							if len(fl.Names) == 0 { // embedded
								d.fields[ts.Name.Name+"."+embeddedName(fl.Type)] = clean(fl.Doc)
							}
						}
					}
				}
			case token.CONST:
				for _, s := range gd.Specs {
					vs := s.(*ast.ValueSpec)
					if len(vs.Names) != 1 || len(vs.Values) != 1 || !ast.IsExported(vs.Names[0].Name) {
						continue
					}
					lit, ok := vs.Values[0].(*ast.BasicLit)
					if !ok {
						continue
					}
					typ, typed := vs.Type.(*ast.Ident)
					if vs.Type != nil && !typed {
						continue
					}
					doc := vs.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					typeName := ""
					if typed {
						typeName = typ.Name + " "
					}
					decl := comment(clean(doc)) + "const " + vs.Names[0].Name + " " + typeName + "= " + lit.Value + "\n\n"
					if clean(doc) == "" {
						decl = "const " + vs.Names[0].Name + " " + typeName + "= " + lit.Value + "\n\n"
					}
					switch {
					case !typed:
						d.plain = append(d.plain, decl)
					case predeclared[typ.Name]:
						d.plain = append(d.plain, decl)
					default:
						d.consts[typ.Name] = append(d.consts[typ.Name], decl)
					}
				}
			}
		}
	}
	return d, nil
}

var predeclared = map[string]bool{"string": true, "int": true, "int32": true, "int64": true, "bool": true}

func embeddedName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.StarExpr:
		return embeddedName(t.X)
	}
	return ""
}

// clean is a doc comment's text without the code-generation markers (+optional, +listType=...)
// and the lines that only say what a generator does.
func clean(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	var out []string
	for _, l := range strings.Split(cg.Text(), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "+") || strings.HasPrefix(t, "---") {
			continue
		}
		out = append(out, l)
	}
	for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n")
}
