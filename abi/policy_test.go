package abi_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
)

func perm(group, resource string, verbs ...string) abi.Permission {
	return abi.Permission{Group: group, Resources: []string{resource}, Verbs: verbs}
}

func TestNewPolicyRefusesAManifestAskingMoreThanTheGrant(t *testing.T) {
	_, err := abi.NewPolicy("p", []abi.Permission{perm("", "configmaps", "get", "list", "watch")},
		[]abi.Permission{perm("", "configmaps", "get", "list", "watch", "delete"), perm("", "secrets", "get")}, nil)
	if err == nil {
		t.Fatal("a manifest asking for delete and secrets was accepted")
	}
	for _, want := range []string{"delete core/configmaps", "get core/secrets", "grant them"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}
}

func TestPolicyAllowsWhatBothManifestAndGrantHold(t *testing.T) {
	p, err := abi.NewPolicy("p", []abi.Permission{perm("", "*", "*")}, []abi.Permission{perm("", "configmaps", "get")}, nil)
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

func TestCheckCallBeforeAnyLookup(t *testing.T) {
	p, err := abi.NewPolicy("p", []abi.Permission{perm("", "configmaps", "get", "list", "watch"), perm("apps", "*", "*")},
		[]abi.Permission{perm("", "configmaps", "get", "list", "watch")}, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		group, verb, namespace string
		want                   string // in the refusal; "" for none
	}{
		{"", "get", "a", ""},
		{"", "get", "", ""},
		{"", "create", "a", `plugin "p" may create nothing in API group core`},
		{"apps", "get", "a", "may get nothing in API group apps"}, // granted, not asked
		{"batch", "get", "a", "may get nothing in API group batch"},
		{"", "get", "b", `namespace "b" is outside plugin "p"'s namespaces [a]`},
	} {
		err := p.CheckCall(c.verb, c.group, "Kind.v1", c.namespace)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckCall(%q, %q, %q) = %v, want %q", c.verb, c.group, c.namespace, err, c.want)
		}
	}
}

func TestRequireSaysWhoseRulesAreMissing(t *testing.T) {
	p := &abi.Policy{Plugin: "p", Granted: []abi.Permission{perm("", "secrets", "list")}, Asked: []abi.Permission{perm("", "configmaps", "list", "watch")}}
	err := p.Require("watching Secret.v1", abi.WatchRules("", "secrets"))
	want := `watching Secret.v1 needs list core/secrets, watch core/secrets: the module's manifest does not ask for list core/secrets, watch core/secrets: add them to its permissions; and plugin "p" was not granted watch core/secrets: grant it in its permissions`
	if err == nil || err.Error() != want {
		t.Errorf("Require = %v\nwant %s", err, want)
	}
	if err := p.Require("listing", abi.WatchRules("", "configmaps")[:1]); err == nil || strings.Contains(err.Error(), "manifest") {
		t.Errorf("list configmaps, asked and not granted: %v; want the grant named, not the manifest", err)
	}
}

func TestCallRules(t *testing.T) {
	for _, c := range []struct {
		verb, sub string
		want      []abi.Rule
	}{
		{"get", "", []abi.Rule{{Resource: "secrets", Verb: "get"}, {Resource: "secrets", Verb: "list"}, {Resource: "secrets", Verb: "watch"}}},
		{"list", "", []abi.Rule{{Resource: "secrets", Verb: "list"}, {Resource: "secrets", Verb: "watch"}}},
		{"update", "", []abi.Rule{{Resource: "secrets", Verb: "update"}}},
		{"update", "status", []abi.Rule{{Resource: "secrets/status", Verb: "update"}}},
		{"patch", "status", []abi.Rule{{Resource: "secrets/status", Verb: "patch"}}},
	} {
		if got := abi.CallRules(c.verb, "", "secrets", c.sub); !slices.Equal(got, c.want) {
			t.Errorf("CallRules(%q, %q) = %v, want %v", c.verb, c.sub, got, c.want)
		}
	}
}

func TestInNamespace(t *testing.T) {
	all := &abi.Policy{}
	some := &abi.Policy{Namespaces: []string{"a", "b"}}
	if !all.InNamespace("x") || !some.InNamespace("b") || some.InNamespace("c") {
		t.Error("InNamespace: no namespaces means all; otherwise only those listed")
	}
}
