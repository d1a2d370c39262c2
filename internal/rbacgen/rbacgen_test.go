package rbacgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

// The markers of kubebuilder's CronJob tutorial, and markers in the other forms controller-gen
// reads, become one call of wasmrec.AddPermissions in the main package; the module's own test
// finds them added, and those of tests and of files a wasm build leaves out not. What a plugin
// cannot carry is said, naming the marker's file and line.
func TestMarkersBecomePermissions(t *testing.T) {
	dir := testenv.PluginModule(t, "testdata/cronjob")
	changed, warnings, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, FileName); changed != want {
		t.Fatalf("changed %q, want %q", changed, want)
	}
	for _, want := range []string{
		"internal/controller/cronjob_controller.go:24: verbs=deletecollection: a plugin never calls it",
		"internal/controller/cronjob_controller.go:24: namespace=team-a: a plugin's namespaces are set where it runs",
		"internal/controller/cronjob_controller.go:26: urls=/metrics: a plugin makes no request of a non-resource URL; left out",
	} {
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
			t.Errorf("no warning %q in\n%s", want, strings.Join(warnings, "\n"))
		}
	}
	if len(warnings) != 3 {
		t.Errorf("%d warnings, want 3:\n%s", len(warnings), strings.Join(warnings, "\n"))
	}
	cmd := exec.Command("go", "test", "-count=1", ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		src, _ := os.ReadFile(filepath.Join(dir, FileName))
		t.Fatalf("the module's test: %v\n%s\n%s", err, out, src)
	}

	// Once more: nothing changes. Without markers, the file goes.
	if changed, _, err := Generate(dir); changed != "" || err != nil {
		t.Errorf("second run: changed %q, %v", changed, err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "internal", "controller", "cronjob_controller.go"), []byte("package controller\n"), 0o644))
	if changed, _, err := Generate(dir); changed == "" || err != nil {
		t.Errorf("after the markers went: changed %q, %v", changed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", FileName, err)
	}
}

// A marker that cannot be read stops the generation, naming its file, its line and what is
// wrong.
func TestMarkerErrors(t *testing.T) {
	for _, tc := range []struct{ marker, want string }{
		{`groups=apps,resources=deployments`, "no verbs: say which, verbs=get;list;watch"},
		{`groups=apps,resources=deployments,verb=get`, `unknown argument "verb"`},
		{`groups=apps,resources deployments,verbs=get`, `"resources deployments" is not key=value`},
		{`groups="apps,resources=deployments,verbs=get`, `groups: "apps`},
		{`groups=apps,resources=deployments,verbs=get;lsit`, `verbs: "lsit" is not a Kubernetes verb: did you mean list?`},
		{`groups=apps,resources=deployments,verbs=`, "no verbs"},
		{`groups=apps,resources=deployments,verbs=get;;list`, "verbs: an empty item"},
		{`resources=deployments,verbs=get`, `no groups: say which API group, groups=apps (groups="" or groups=core for the core group)`},
		{`groups=apps,resources=deployments,verbs=get;list // and watch`, `"list // and watch" holds a space`},
		{`groups=apps,resources=deployments,verbs=get,list`, `"list" is not key=value: separate a list's items with ;`},
	} {
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\n// +kubebuilder:rbac:"+tc.marker+"\n"), 0o644))
		_, _, err := Generate(dir)
		if err == nil || !strings.Contains(err.Error(), "main.go:3: +kubebuilder:rbac:"+tc.marker+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want main.go:3 and %q", tc.marker, err, tc.want)
		}
	}
}

// A resource a built-in group does not serve is warned of, with what was likely meant; a
// whole quoted list is read as one.
func TestUnknownBuiltInResource(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\n// +kubebuilder:rbac:groups=batch,resources=job;cronjobs/status,verbs=\"get;list\"\n"), 0o644))
	_, warnings, err := Generate(dir)
	if err != nil || len(warnings) != 1 || warnings[0] != `main.go:3: resources=job: API group "batch" has no resource "job": did you mean jobs?` {
		t.Fatalf("warnings %q, %v", warnings, err)
	}
	src, _ := os.ReadFile(filepath.Join(dir, FileName))
	if !strings.Contains(string(src), `Verbs: []string{"get", "list"}`) {
		t.Errorf("the quoted list was not read as get and list:\n%s", src)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
