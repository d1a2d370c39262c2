package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/wasmrec/wasmrec/internal/kinds"
	"github.com/wasmrec/wasmrec/internal/release"
)

//go:embed templates
var templates embed.FS

// Options say what to write.
type Options struct {
	// Name is the plugin's name, and the folder's: lowercase letters, digits and dashes.
	Name string
	// Lang is "go" or "c".
	Lang string
	// For is the kind reconciled, "APIVERSION/KIND": "v1/ConfigMap", "apps/v1/Deployment".
	For string
	// Module is the Go module path; defaults to Name.
	Module string
	// Dir is where the folder is made; defaults to Name in the working directory.
	Dir string
}

var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

type data struct {
	Name, Module, SDKVersion string
	ModuleFile               string // what wasmrec build writes: the folder's name.wasm
	APIVersion, Group, Kind  string
	Resource, Annotation     string
	Version, Singular        string // a custom resource's, for its CRD
	Namespaced               bool
	// TypesImport and TypesAlias are the package of the kind's generated Go type (sdk/go/k8s),
	// for a Go plugin of a kind that has one.
	TypesImport, TypesAlias string
}

// Write makes the folder and returns the files written, relative to it. It refuses a folder
// that exists and is not empty.
func Write(o Options) ([]string, error) {
	if !nameRE.MatchString(o.Name) {
		return nil, fmt.Errorf("plugin name %q: use lowercase letters, digits and dashes, starting with a letter (it names the module file, the plugin in logs and its field manager)", o.Name)
	}
	if o.Lang != "go" && o.Lang != "c" {
		return nil, fmt.Errorf("--lang %q: use go or c", o.Lang)
	}
	k, err := kinds.ParseFor(o.For)
	if err != nil {
		return nil, err
	}
	if o.Dir == "" {
		o.Dir = o.Name
	}
	if o.Module == "" {
		o.Module = o.Name
	}
	if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s exists and is not empty: choose another name or folder (--dir)", o.Dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	d := data{
		Name: o.Name, Module: o.Module, SDKVersion: release.Version, ModuleFile: filepath.Base(abs) + ".wasm",
		APIVersion: k.APIVersion(), Group: k.Group, Kind: k.Kind,
		Resource: k.Resource, Namespaced: k.Namespaced,
		Annotation: "wasmrec.dev/" + o.Name,
		Version:    k.Version, Singular: strings.ToLower(k.Kind),
	}
	files := map[string]string{
		"host.yaml":                   "templates/host.yaml.tmpl",
		"samples/" + o.Name + ".yaml": "templates/sample.yaml.tmpl",
		".gitignore":                  "templates/gitignore.tmpl",
		"tests/" + o.Name + ".yaml":   "templates/tests/cases.yaml.tmpl",
	}
	if !k.BuiltIn { // a custom resource: a CRD to start from
		files["crds/"+k.Resource+"."+k.Group+".yaml"] = "templates/crd.yaml.tmpl"
	}
	if o.Lang == "go" {
		files["go.mod"] = "templates/go/go.mod.tmpl"
		files["main.go"] = "templates/go/main.go.tmpl"
		files["main_test.go"] = "templates/go/main_test.go.tmpl"
		if t, ok := typedKinds[d.APIVersion+"/"+d.Kind]; ok { // typed objects: sdk/go/k8s and package client
			d.TypesImport, d.TypesAlias = t.Import, t.Alias
		} else if !k.BuiltIn { // the custom resource's Go types, which wasmrec build generates code for
			d.TypesImport = path.Join(o.Module, "api", k.Version)
			d.TypesAlias = goName(strings.Split(k.Group, ".")[0] + k.Version)
			files["api/"+k.Version+"/groupversion.go"] = "templates/go/api/groupversion.go.tmpl"
			files["api/"+k.Version+"/"+d.Singular+"_types.go"] = "templates/go/api/types.go.tmpl"
		}
		if d.TypesImport != "" {
			files["main.go"] = "templates/go/typed/main.go.tmpl"
			files["main_test.go"] = "templates/go/typed/main_test.go.tmpl"
		}
	} else {
		files[o.Name+".c"] = "templates/c/plugin.c.tmpl"
	}
	var written []string
	for out, in := range files {
		t, err := template.ParseFS(templates, in)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return nil, fmt.Errorf("%s: %w", out, err)
		}
		path := filepath.Join(o.Dir, filepath.FromSlash(out))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		written = append(written, out)
	}
	slices.Sort(written)
	return written, nil
}

// goName is s with what a Go identifier cannot hold left out: "my-groupv1" is mygroupv1.
func goName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.ToLower(s))
	if s == "" || s[0] <= '9' {
		s = "api" + s
	}
	return s
}
