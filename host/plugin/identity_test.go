package plugin

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/wasmrec/wasmrec/abi"
)

// RBAC gives each plugin exactly its grant, where its namespaces say, bound to its own
// ServiceAccount, and lets the host impersonate those accounts and no other.
func TestRBAC(t *testing.T) {
	objs, err := RBAC("plugins", "system/host", []Config{
		{Name: "team", Namespaces: []string{"a", "b"}, Permissions: []abi.Permission{
			{Group: "", Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{Group: "", Resources: []string{"events"}, Verbs: []string{"create"}}}},
		{Name: "wide", Permissions: []abi.Permission{{Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.Role:
			got = append(got, "Role "+o.Namespace+"/"+o.Name+" "+rulesString(o.Rules))
		case *rbacv1.ClusterRole:
			got = append(got, "ClusterRole "+o.Name+" "+rulesString(o.Rules))
		case *rbacv1.RoleBinding:
			got = append(got, "RoleBinding "+o.Namespace+"/"+o.Name+" -> "+o.Subjects[0].Namespace+"/"+o.Subjects[0].Name)
		case *rbacv1.ClusterRoleBinding:
			got = append(got, "ClusterRoleBinding "+o.Name+" -> "+o.Subjects[0].Namespace+"/"+o.Subjects[0].Name)
		default:
			got = append(got, o.GetObjectKind().GroupVersionKind().Kind)
		}
	}
	want := []string{
		"ServiceAccount",
		"Role a/wasmrec-plugin-team [core configmaps get,list,watch,patch] [core events create] [core events patch]",
		"RoleBinding a/wasmrec-plugin-team -> plugins/team",
		"Role b/wasmrec-plugin-team [core configmaps get,list,watch,patch] [core events create] [core events patch]",
		"RoleBinding b/wasmrec-plugin-team -> plugins/team",
		"ServiceAccount",
		"ClusterRole wasmrec-plugin-wide [apps deployments list,watch]",
		"ClusterRoleBinding wasmrec-plugin-wide -> plugins/wide",
		"Role plugins/wasmrec-impersonate-plugins [core serviceaccounts impersonate team,wide]",
		"RoleBinding plugins/wasmrec-impersonate-plugins -> system/host",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := RBAC("plugins", "host", nil); err == nil || !strings.Contains(err.Error(), "namespace/name") {
		t.Fatalf("a host account without a namespace: err = %v", err)
	}
}

func rulesString(rules []rbacv1.PolicyRule) string {
	var out []string
	for _, r := range rules {
		group := strings.Join(r.APIGroups, ",")
		if group == "" {
			group = "core"
		}
		s := "[" + group + " " + strings.Join(r.Resources, ",") + " " + strings.Join(r.Verbs, ",")
		if len(r.ResourceNames) > 0 {
			s += " " + strings.Join(r.ResourceNames, ",")
		}
		out = append(out, s+"]")
	}
	return strings.Join(out, " ")
}
