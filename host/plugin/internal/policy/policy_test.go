package policy

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
)

var (
	cmGVK     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	appGVK    = schema.GroupVersionKind{Group: "demo.wasmrec.dev", Version: "v1", Kind: "App"}
)

func perm(group, resource string, verbs ...string) abi.Permission {
	return abi.Permission{Group: group, Resources: []string{resource}, Verbs: verbs}
}

func mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(cmGVK, meta.RESTScopeNamespace)
	m.Add(secretGVK, meta.RESTScopeNamespace)
	return m // App is not served
}

func TestCheckWatchesNamesTheMissingRulesAndWhose(t *testing.T) {
	m := &abi.Manifest{
		For:         abi.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Watches:     []abi.Watch{{APIVersion: "v1", Kind: "Secret", Map: abi.MapSameName}, {APIVersion: "demo.wasmrec.dev/v1", Kind: "App", Map: abi.MapSameName}},
		Permissions: []abi.Permission{perm("", "configmaps", "get", "list", "watch")},
	}
	grant := []abi.Permission{perm("", "configmaps", "get", "list", "watch"), perm("", "secrets", "list")}
	p, err := New("p", grant, m.Permissions, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	unresolved, err := p.CheckWatches(m, mapper())
	if !slices.Equal(unresolved, []schema.GroupVersionKind{appGVK}) {
		t.Errorf("unresolved = %v, want the App kind, which is not served", unresolved)
	}
	if err == nil {
		t.Fatal("watching Secrets without asking for list and watch was accepted")
	}
	for _, want := range []string{"watching Secret.v1", "manifest does not ask for list core/secrets, watch core/secrets", `plugin "p" was not granted watch core/secrets`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "configmaps") {
		t.Errorf("the refusal names configmaps, which are asked and granted:\n%v", err)
	}
}

func TestCheckWatchesAcceptsWhatIsAskedAndGranted(t *testing.T) {
	m := &abi.Manifest{
		For:         abi.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Owns:        []abi.Watch{{APIVersion: "v1", Kind: "Secret"}},
		Permissions: []abi.Permission{{Resources: []string{"configmaps", "secrets"}, Verbs: []string{"list", "watch"}}},
	}
	p, err := New("p", []abi.Permission{perm("", "*", "list", "watch")}, m.Permissions, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if unresolved, err := p.CheckWatches(m, mapper()); err != nil || len(unresolved) > 0 {
		t.Errorf("CheckWatches = %v, %v; want nothing unresolved and no error", unresolved, err)
	}
}
