package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

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
	// With CRD it may be empty: the kind of the file's one CRD, at its storage version.
	For string
	// Module is the Go module path; defaults to Name.
	Module string
	// Dir is where the folder is made; defaults to Name in the working directory.
	Dir string
	// CRD, for a custom resource's kind, is a YAML file holding its CustomResourceDefinition:
	// the folder's crds/ gets it as it is, and a Go plugin the Go types of its schema. Without
	// it, a CRD and types of an empty spec are written to start from.
	CRD string
}

// stdPackages are the standard library's packages whose import path is one word (go list std):
// a module of such a path cannot build, its main package clashing with the library's.
var stdPackages = []string{"bufio", "bytes", "cmp", "context", "crypto", "embed", "encoding", "errors", "expvar", "flag", "fmt",
	"hash", "html", "image", "io", "iter", "log", "maps", "math", "mime", "net", "os", "path", "plugin", "reflect", "regexp",
	"runtime", "slices", "sort", "strconv", "strings", "structs", "sync", "syscall", "testing", "time", "unicode", "unique",
	"unsafe", "weak"}

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
	// TypesLocal is a TypesImport of the plugin's own module, imported apart from the SDK's.
	TypesLocal bool
	// SampleBody is what the sample object needs beside its metadata for the API server to
	// take it, for the built-in kinds that need more ("" for the rest).
	SampleBody string
}

// podTemplate is a pod template that the API server takes, for the workload kinds' samples.
const podTemplate = `template:
  metadata:
    labels: {app: %[1]s}
  spec:
    containers:
      - {name: app, image: registry.k8s.io/pause:3.10}%[2]s`

// sampleBodies are what the samples of built-in kinds need to be valid ("%[1]s" is the
// sample's name). Kinds not here take an object of metadata only.
var sampleBodies = map[string]string{
	"apps/v1/Deployment":  "spec:\n  replicas: 1\n  selector:\n    matchLabels: {app: %[1]s}\n" + indent(podTemplate, "  ", ""),
	"apps/v1/ReplicaSet":  "spec:\n  replicas: 1\n  selector:\n    matchLabels: {app: %[1]s}\n" + indent(podTemplate, "  ", ""),
	"apps/v1/StatefulSet": "spec:\n  replicas: 1\n  serviceName: %[1]s\n  selector:\n    matchLabels: {app: %[1]s}\n" + indent(podTemplate, "  ", ""),
	"apps/v1/DaemonSet":   "spec:\n  selector:\n    matchLabels: {app: %[1]s}\n" + indent(podTemplate, "  ", ""),
	"batch/v1/Job":        "spec:\n" + indent(podTemplate, "  ", "\n    restartPolicy: Never"),
	"batch/v1/CronJob":    "spec:\n  schedule: \"*/5 * * * *\"\n  jobTemplate:\n    spec:\n" + indent(podTemplate, "      ", "\n    restartPolicy: Never"),
	"v1/Pod":              "spec:\n  containers:\n    - {name: app, image: registry.k8s.io/pause:3.10}",
	"v1/Service":          "spec:\n  selector: {app: %[1]s}\n  ports:\n    - {port: 80}",
}

// indent is the pod template with its placeholders filled (%[2]s: what ends its pod spec) and
// each line indented by prefix.
func indent(tmpl, prefix, specEnd string) string {
	s := strings.ReplaceAll(tmpl, "%[2]s", specEnd)
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
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
	var (
		crds  []crdDoc
		holds []string
		err   error
	)
	if o.CRD != "" {
		if crds, holds, err = readCRDs(o.CRD); err != nil {
			return nil, err
		}
		if o.For == "" {
			if o.For, err = forOf(o.CRD, crds, holds); err != nil {
				return nil, err
			}
		}
	}
	k, err := kinds.ParseFor(o.For)
	if err != nil {
		for _, c := range crds { // --for v1/CronJob, and the file has the CRD of another group's CronJob
			if i := strings.LastIndex(o.For, "/"); i >= 0 && c.crd.Spec.Names.Kind == o.For[i+1:] {
				return nil, fmt.Errorf("%w\n--crd %s defines %s/%s: use its group in --for (or leave --for out)", err, o.CRD, c.crd.Spec.Group, c.crd.Spec.Names.Kind)
			}
		}
		return nil, err
	}
	var crd *apiextensionsv1.CustomResourceDefinition
	var crdYAML []byte
	if o.CRD != "" {
		if k.BuiltIn {
			return nil, fmt.Errorf("--crd: %s/%s is a built-in kind, which has no CustomResourceDefinition: leave --crd out", k.APIVersion(), k.Kind)
		}
		c, err := pickCRD(o.CRD, crds, holds, k)
		if err != nil {
			return nil, err
		}
		crd, crdYAML = c.crd, c.doc
		k.Resource, k.Namespaced = crd.Spec.Names.Plural, crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	}
	if o.Dir == "" {
		o.Dir = o.Name
	}
	if o.Module == "" {
		o.Module = o.Name
	}
	if o.Lang == "go" && slices.Contains(stdPackages, o.Module) {
		return nil, fmt.Errorf("module path %q is also a package of Go's standard library, which go build cannot tell from the plugin's: give the module another path (--module example.com/%s) or the plugin another name", o.Module, o.Name)
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
	if crd != nil && crd.Spec.Names.Singular != "" {
		d.Singular = crd.Spec.Names.Singular
	}
	if crd != nil {
		d.SampleBody = sampleBody(crd, k.Version)
	}
	if body, ok := sampleBodies[d.APIVersion+"/"+d.Kind]; ok {
		d.SampleBody = strings.ReplaceAll(body, "%[1]s", o.Name+"-sample")
	}
	files := map[string]string{
		"host.yaml":                   "templates/host.yaml.tmpl",
		"samples/" + o.Name + ".yaml": "templates/sample.yaml.tmpl",
		".gitignore":                  "templates/gitignore.tmpl",
		"tests/" + o.Name + ".yaml":   "templates/tests/cases.yaml.tmpl",
	}
	written := map[string][]byte{} // files written as they are, not from a template
	switch {
	case crd != nil:
		written["crds/"+k.Resource+"."+k.Group+".yaml"] = append(crdYAML, '\n')
	case !k.BuiltIn: // a custom resource: a CRD to start from
		files["crds/"+k.Resource+"."+k.Group+".yaml"] = "templates/crd.yaml.tmpl"
	}
	if o.Lang == "go" {
		files["go.mod"] = "templates/go/go.mod.tmpl"
		files["main.go"] = "templates/go/main.go.tmpl"
		files["main_test.go"] = "templates/go/main_test.go.tmpl"
		if t, ok := typedKinds[d.APIVersion+"/"+d.Kind]; ok { // typed objects: sdk/go/k8s and package client
			d.TypesImport, d.TypesAlias = t.Import, t.Alias
		} else if !k.BuiltIn { // the custom resource's Go types, which wasmrec build generates code for
			d.TypesImport, d.TypesLocal = path.Join(o.Module, "api", k.Version), true
			d.TypesAlias = goName(strings.Split(k.Group, ".")[0] + k.Version)
			files["api/"+k.Version+"/groupversion.go"] = "templates/go/api/groupversion.go.tmpl"
			types := "api/" + k.Version + "/" + d.Singular + "_types.go"
			if crd == nil {
				files[types] = "templates/go/api/types.go.tmpl"
			} else if written[types], err = typesFromSchema(k.Version, crd, k.Version); err != nil {
				return nil, err
			}
		}
		if d.TypesImport != "" {
			files["main.go"] = "templates/go/typed/main.go.tmpl"
			files["main_test.go"] = "templates/go/typed/main_test.go.tmpl"
		}
	} else {
		files[o.Name+".c"] = "templates/c/plugin.c.tmpl"
	}
	for out, in := range files {
		t, err := template.ParseFS(templates, in)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return nil, fmt.Errorf("%s: %w", out, err)
		}
		written[out] = b.Bytes()
	}
	for out, b := range written {
		path := filepath.Join(o.Dir, filepath.FromSlash(out))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
	}
	return slices.Sorted(maps.Keys(written)), nil
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
