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
	configMaps = schema.GroupResource{Resource: "configmaps"}
	secrets    = schema.GroupResource{Resource: "secrets"}
	cmGVK      = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK  = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	appGVK     = schema.GroupVersionKind{Group: "demo.wasmrec.dev", Version: "v1", Kind: "App"}
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

func TestNewRefusesAManifestAskingMoreThanTheGrant(t *testing.T) {
	_, err := New("p", []abi.Permission{perm("", "configmaps", "get", "list", "watch")},
		[]abi.Permission{perm("", "configmaps", "get", "list", "watch", "delete"), perm("", "secrets", "get")}, nil)
	if err == nil {
		t.Fatal("a manifest asking for delete and secrets was accepted")
	}
	for _, want := range []string{"delete core/configmaps", "get core/secrets"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}
}

func TestAllowsNeedsBothManifestAndGrant(t *testing.T) {
	p, err := New("p", []abi.Permission{perm("", "*", "*")}, []abi.Permission{perm("", "configmaps", "get")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Allows(abi.Rule{Resource: "configmaps", Verb: "get"}) {
		t.Error("get configmaps is asked and granted, and refused")
	}
	if p.Allows(abi.Rule{Resource: "configmaps", Verb: "list"}) {
		t.Error("list configmaps is granted but not asked, and allowed")
	}
	if p.Allows(abi.Rule{Resource: "secrets", Verb: "get"}) {
		t.Error("get secrets is granted but not asked, and allowed")
	}
}

func TestMayCallBeforeAnyLookup(t *testing.T) {
	p, err := New("p", []abi.Permission{perm("", "configmaps", "get", "list", "watch"), perm("apps", "*", "*")},
		[]abi.Permission{perm("", "configmaps", "get", "list", "watch")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		group, verb string
		want        bool
	}{{"", "get", true}, {"", "create", false}, {"apps", "get", false}, {"batch", "get", false}} {
		if got := p.MayCall(c.group, c.verb); got != c.want {
			t.Errorf("MayCall(%q, %q) = %v, want %v", c.group, c.verb, got, c.want)
		}
	}
}

func TestCheckWatchesNamesTheMissingRulesAndWhose(t *testing.T) {
	m := &abi.Manifest{
		For:         abi.Watch{APIVersion: "v1", Kind: "ConfigMap"},
		Watches:     []abi.Watch{{APIVersion: "v1", Kind: "Secret", Map: abi.MapSameName}, {APIVersion: "demo.wasmrec.dev/v1", Kind: "App", Map: abi.MapSameName}},
		Permissions: []abi.Permission{perm("", "configmaps", "get", "list", "watch")},
	}
	grant := []abi.Permission{perm("", "configmaps", "get", "list", "watch"), perm("", "secrets", "list")}
	p, err := New("p", grant, m.Permissions, nil)
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
	p, err := New("p", []abi.Permission{perm("", "*", "list", "watch")}, m.Permissions, nil)
	if err != nil {
		t.Fatal(err)
	}
	if unresolved, err := p.CheckWatches(m, mapper()); err != nil || len(unresolved) > 0 {
		t.Errorf("CheckWatches = %v, %v; want nothing unresolved and no error", unresolved, err)
	}
}

func TestReadRulesIncludeTheInformers(t *testing.T) {
	got := ReadRules("get", secrets)
	want := []abi.Rule{{Resource: "secrets", Verb: "get"}, {Resource: "secrets", Verb: "list"}, {Resource: "secrets", Verb: "watch"}}
	if !slices.Equal(got, want) {
		t.Errorf("ReadRules(get) = %v, want %v", got, want)
	}
	if got := ReadRules("list", configMaps); len(got) != 2 {
		t.Errorf("ReadRules(list) = %v, want list and watch once each", got)
	}
}

func TestInNamespace(t *testing.T) {
	all, _ := New("p", nil, nil, nil)
	some, _ := New("p", nil, nil, []string{"a", "b"})
	if !all.InNamespace("x") || !some.InNamespace("b") || some.InNamespace("c") {
		t.Error("InNamespace: no namespaces means all; otherwise only those listed")
	}
}
