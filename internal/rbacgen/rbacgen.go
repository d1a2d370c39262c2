package rbacgen

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"go/build"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// FileName is the file written in the module's main package.
const FileName = "zz_generated.wasmrec_rbac.go"

const marker = "+kubebuilder:rbac:"

// Generate writes FileName in the module at dir (its main package, at the root) from the RBAC
// markers of the module's Go files, or removes it once no marker is left. It returns the file
// if it wrote or removed it, and warnings for what of the markers a plugin's permissions do
// not carry, each naming its marker's file and line.
func Generate(dir string) (changed string, warnings []string, err error) {
	if dir, err = filepath.Abs(dir); err != nil {
		return "", nil, err
	}
	var rules []rule
	err = walk(dir, func(path string) error {
		rs, err := fileRules(dir, path)
		rules = append(rules, rs...)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(dir, FileName)
	perms, warnings := permissions(rules)
	if len(perms) == 0 {
		if err := os.Remove(out); errors.Is(err, fs.ErrNotExist) {
			return "", warnings, nil
		} else if err != nil {
			return "", warnings, err
		}
		return out, warnings, nil
	}
	pkg, err := packageName(dir)
	if err != nil {
		return "", warnings, err
	}
	src, err := source(pkg, perms)
	if err != nil {
		return "", warnings, err
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, src) {
		return "", warnings, nil
	}
	return out, warnings, os.WriteFile(out, src, 0o644)
}

// rule is one marker, read.
type rule struct {
	at                              string // file:line, relative to the module
	groups, resources, names, verbs []string
	urls                            []string
	namespace                       string
}

// wasmBuild is the build context of a plugin's module: which files its build compiles.
var wasmBuild = func() build.Context {
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = "wasip1", "wasm", false
	return ctx
}()

// walk calls f for each Go file of the module at dir that a wasip1/wasm build compiles, tests
// and FileName aside: the module's own folders, not testdata, vendor, hidden ones or other
// modules.
func walk(dir string, f func(path string) error) error {
	return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if p == dir {
				return nil
			}
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == FileName {
			return nil
		}
		if ok, err := wasmBuild.MatchFile(filepath.Dir(p), name); err != nil || !ok {
			return err
		}
		return f(p)
	})
}

// fileRules reads the markers of one file's comments.
func fileRules(moduleDir, path string) ([]rule, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err // the build would stop on it too
	}
	rel, _ := filepath.Rel(moduleDir, path)
	var rules []rule
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
			if !strings.HasPrefix(text, marker) {
				continue
			}
			at := fmt.Sprintf("%s:%d", filepath.ToSlash(rel), fset.Position(c.Slash).Line)
			r, err := parseRule(strings.TrimPrefix(text, marker))
			if err != nil {
				return nil, fmt.Errorf("%s: %s%s: %w", at, marker, strings.TrimPrefix(text, marker), err)
			}
			r.at = at
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// parseRule reads a marker's arguments: key=value, separated by commas; a value is a list of
// items separated by semicolons, or in braces separated by commas; an item may be quoted.
func parseRule(s string) (rule, error) {
	var r rule
	for _, arg := range splitTop(s) {
		key, value, ok := strings.Cut(arg, "=")
		if !ok {
			return r, fmt.Errorf("%q is not key=value: separate a list's items with ; (verbs=get;list) or write them in braces (verbs={get,list})", arg)
		}
		items, err := listItems(value)
		if err != nil {
			return r, fmt.Errorf("%s: %w", key, err)
		}
		switch strings.TrimSpace(key) {
		case "groups":
			r.groups = items
		case "resources":
			r.resources = items
		case "resourceNames":
			r.names = items
		case "verbs":
			r.verbs = items
		case "urls":
			r.urls = items
		case "namespace":
			r.namespace = strings.Join(items, ";")
		case "roleName": // names controller-gen's Role; a plugin has no Role of its own
		default:
			return r, fmt.Errorf("unknown argument %q (known: groups, resources, resourceNames, verbs, urls, namespace, roleName)", key)
		}
	}
	switch {
	case len(r.verbs) == 0 || slices.Equal(r.verbs, []string{""}):
		return r, errors.New("no verbs: say which, verbs=get;list;watch")
	case len(r.groups) == 0 && len(r.urls) == 0:
		return r, errors.New(`no groups: say which API group, groups=apps (groups="" or groups=core for the core group)`)
	case len(r.resources) == 0 && len(r.urls) == 0:
		return r, errors.New("no resources: say which, resources=deployments;deployments/status")
	}
	for _, v := range r.verbs {
		if v != "*" && !slices.Contains(abi.Verbs, v) && !slices.Contains(otherVerbs, v) {
			if m := kinds.Closest(v, append(slices.Clone(abi.Verbs), otherVerbs...)); m != "" {
				return r, fmt.Errorf("verbs: %q is not a Kubernetes verb: did you mean %s?", v, m)
			}
			return r, fmt.Errorf("verbs: %q is not a Kubernetes verb (a plugin calls %s)", v, strings.Join(abi.Verbs, ", "))
		}
	}
	return r, nil
}

// otherVerbs are Kubernetes verbs a plugin never calls.
var otherVerbs = []string{"deletecollection", "escalate", "bind", "impersonate", "use", "approve", "sign", "attest", "proxy"}

// splitTop splits s at the commas outside braces and quotes.
func splitTop(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' && (i == 0 || s[i-1] != '\\'):
			quoted = !quoted
		case quoted:
		case c == '{':
			depth++
		case c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func listItems(v string) ([]string, error) {
	v = strings.TrimSpace(v)
	sep := ";"
	switch {
	case strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}"):
		v, sep = v[1:len(v)-1], ","
	case len(v) > 1 && strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) && strings.Count(v, `"`) == 2:
		v = v[1 : len(v)-1] // "get;list": the whole list quoted
		if v == "" {
			return []string{""}, nil // groups="": the core group
		}
	}
	var out []string
	for _, item := range strings.Split(v, sep) {
		item = strings.TrimSpace(item)
		if strings.HasPrefix(item, `"`) {
			u, err := strconv.Unquote(item)
			if err != nil {
				return nil, fmt.Errorf("%s is not a quoted string: quote each item whole, or none", item)
			}
			item = u
		}
		if item == "" && v != "" {
			return nil, errors.New("an empty item: drop the extra separator")
		}
		if strings.ContainsAny(item, " \t") {
			return nil, fmt.Errorf("%q holds a space: a marker's value ends at the end of the line (no comment after it)", item)
		}
		out = append(out, item)
	}
	return out, nil
}

// permissions merges the rules as controller-gen does (the group "core" is ""; verbs of one
// group and resource join), into permissions of one group whose resources share their verbs,
// in a fixed order; and says what of the rules they leave out.
func permissions(rules []rule) ([]abi.Permission, []string) {
	type gr struct{ group, resource string }
	verbs := map[gr]map[string]bool{}
	var warnings []string
	warn := func(r rule, format string, args ...any) {
		warnings = append(warnings, r.at+": "+fmt.Sprintf(format, args...))
	}
	for _, r := range rules {
		if len(r.urls) > 0 {
			warn(r, "urls=%s: a plugin makes no request of a non-resource URL; left out", strings.Join(r.urls, ";"))
		}
		if len(r.resources) == 0 { // urls only
			continue
		}
		if r.namespace != "" {
			warn(r, "namespace=%s: a plugin's namespaces are set where it runs (its namespaces in host.yaml, or its Plugin's namespace): asked for in each of them", r.namespace)
		}
		if len(r.names) > 0 {
			warn(r, "resourceNames=%s: a plugin's permissions name whole resources: asked for every one of %s", strings.Join(r.names, ";"), strings.Join(r.resources, ";"))
		}
		var vs []string
		for _, v := range r.verbs {
			switch {
			case v == "*":
				vs = append(vs, abi.Verbs...)
			case slices.Contains(abi.Verbs, v):
				vs = append(vs, v)
			case v == "deletecollection":
				warn(r, "verbs=deletecollection: a plugin never calls it (DeleteAllOf lists, then deletes one at a time: list and delete); left out")
			default: // otherVerbs
				warn(r, "verbs=%s: a plugin never calls it (it calls %s); left out", v, strings.Join(abi.Verbs, ", "))
			}
		}
		for _, g := range r.groups {
			if g == "core" {
				g = ""
			}
			if known := kinds.Resources(g); len(known) > 0 {
				for _, res := range r.resources {
					base, _, _ := strings.Cut(res, "/")
					if base != "*" && !slices.Contains(known, base) {
						if m := kinds.Closest(base, known); m != "" {
							warn(r, "resources=%s: API group %q has no resource %q: did you mean %s?", res, g, base, m)
						} else {
							warn(r, "resources=%s: API group %q has no resource %q", res, g, base)
						}
					}
				}
			}
			for _, res := range r.resources {
				k := gr{g, res}
				if verbs[k] == nil {
					verbs[k] = map[string]bool{}
				}
				for _, v := range vs {
					verbs[k][v] = true
				}
			}
		}
	}
	// One permission per group and set of verbs, its resources sorted; groups in order, then
	// the first resource of each.
	type key struct{ group, verbs string }
	byKey := map[key]*abi.Permission{}
	var perms []*abi.Permission
	for k, set := range verbs {
		var vs []string
		for _, v := range abi.Verbs {
			if set[v] {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		pk := key{k.group, strings.Join(vs, ",")}
		p := byKey[pk]
		if p == nil {
			p = &abi.Permission{Group: k.group, Verbs: vs}
			byKey[pk] = p
			perms = append(perms, p)
		}
		p.Resources = append(p.Resources, k.resource)
	}
	out := make([]abi.Permission, 0, len(perms))
	for _, p := range perms {
		slices.Sort(p.Resources)
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b abi.Permission) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Resources[0], b.Resources[0]))
	})
	return out, warnings
}

// packageName is the package clause of the Go files at the module's root.
func packageName(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == FileName {
			continue
		}
		if ok, err := wasmBuild.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.PackageClauseOnly)
		if err != nil {
			return "", err
		}
		return f.Name.Name, nil
	}
	return "", fmt.Errorf("%s holds kubebuilder RBAC markers but no Go package at its root: a plugin's main package is at its module's root", dir)
}

const header = "// Code generated by wasmrec build from this module's +kubebuilder:rbac markers. DO NOT EDIT.\n\n"

func source(pkg string, perms []abi.Permission) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	fmt.Fprintf(&b, "package %s\n\nimport wasmrec %q\n\nfunc init() {\n\twasmrec.AddPermissions(\n", pkg, "github.com/wasmrec/wasmrec/sdk/go")
	for _, p := range perms {
		fmt.Fprintf(&b, "\t\twasmrec.Permission{Group: %q, Resources: %s, Verbs: %s},\n", p.Group, stringSlice(p.Resources), stringSlice(p.Verbs))
	}
	b.WriteString("\t)\n}\n")
	return format.Source(b.Bytes())
}

func stringSlice(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[]string{" + strings.Join(q, ", ") + "}"
}
