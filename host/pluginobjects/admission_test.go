package pluginobjects_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

// right is a right the fake authorizer gives a user, as RBAC would: "*" in group, resource or
// verb matches anything (a request for "*" matches only "*"); resource may be
// "resource/subresource" or "*/subresource"; an empty namespace is cluster-wide (a
// ClusterRoleBinding) and matches every namespace; an empty name matches every name.
type right struct{ verb, group, resource, namespace, name string }

// rbac is a fake authorizer: each user's rights, and every check asked of it.
type rbac struct {
	rights map[string][]right

	mu     sync.Mutex
	checks []string
}

func (r *rbac) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	res := a.GetResource()
	if a.GetSubresource() != "" {
		res += "/" + a.GetSubresource()
	}
	r.mu.Lock()
	r.checks = append(r.checks, fmt.Sprintf("%s %s %s/%s %s %s", a.GetUser().GetName(), a.GetVerb(), a.GetAPIGroup(), res, a.GetNamespace(), a.GetName()))
	r.mu.Unlock()
	match := func(rule, req string) bool { return rule == "*" || rule == req }
	for _, g := range r.rights[a.GetUser().GetName()] {
		resOK := match(g.resource, res) ||
			(strings.HasPrefix(g.resource, "*/") && a.GetSubresource() != "" && g.resource[2:] == a.GetSubresource())
		if match(g.verb, a.GetVerb()) && match(g.group, a.GetAPIGroup()) && resOK &&
			(g.namespace == "" || g.namespace == a.GetNamespace()) && (g.name == "" || g.name == a.GetName()) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (r *rbac) takeChecks() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.checks
	r.checks = nil
	return c
}

// warnings records the warnings a request is answered with.
type warnings []string

func (w *warnings) AddWarning(_, text string) { *w = append(*w, text) }

// admissionPlugin is the API server's own ValidatingAdmissionPolicy admission plugin, given
// admission.yaml's policy and bindings through a fake clientset, and authz as the authorizer.
func admissionPlugin(t *testing.T, authz *rbac) *validating.Plugin {
	t.Helper()
	policy, bindings, err := pluginobjects.ParseAdmissionPolicy()
	if err != nil {
		t.Fatal(err)
	}
	return admissionPluginOf(t, authz, policy, bindings)
}

// admissionPluginOf is admissionPlugin with another policy.
func admissionPluginOf(t *testing.T, authz *rbac, policy *admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) *validating.Plugin {
	t.Helper()
	// What the API server's defaulting adds to a policy as it is stored.
	mc := policy.Spec.MatchConstraints
	equivalent, all := admissionregistrationv1.Equivalent, admissionregistrationv1.AllScopes
	mc.MatchPolicy, mc.NamespaceSelector, mc.ObjectSelector = &equivalent, &metav1.LabelSelector{}, &metav1.LabelSelector{}
	for i := range mc.ResourceRules {
		mc.ResourceRules[i].Scope = &all
	}
	objs := []runtime.Object{policy}
	for _, b := range bindings {
		objs = append(objs, b)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := validating.NewPlugin(nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	p.SetExternalKubeClientSet(client)
	p.SetExternalKubeInformerFactory(factory)
	p.SetRESTMapper(meta.NewDefaultRESTMapper(nil))
	p.SetDynamicClient(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()))
	p.SetDrainedNotification(stop)
	p.SetUnconditionalAuthorizer(authz)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return p
}

// pluginReq is an admission request about a Plugin (namespace set) or a ClusterPlugin.
type pluginReq struct {
	op          admission.Operation
	user        string
	namespace   string         // "" for a ClusterPlugin
	spec, old   map[string]any // old: for an update
	subresource string
	labels      map[string]any
}

func (r pluginReq) attributes() admission.Attributes {
	kind, resource := "Plugin", "plugins"
	if r.namespace == "" {
		kind, resource = "ClusterPlugin", "clusterplugins"
	}
	object := func(spec, labels map[string]any) *unstructured.Unstructured {
		meta := map[string]any{"name": "labeler"}
		if r.namespace != "" {
			meta["namespace"] = r.namespace
		}
		if labels != nil {
			meta["labels"] = labels
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "wasmrec.dev/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}}
	}
	var old runtime.Object
	var opts runtime.Object = &metav1.CreateOptions{}
	if r.op == admission.Update {
		old, opts = object(r.old, nil), &metav1.UpdateOptions{}
	}
	gv := schema.GroupVersion{Group: "wasmrec.dev", Version: "v1alpha1"}
	return admission.NewAttributesRecord(object(r.spec, r.labels), old, gv.WithKind(kind), r.namespace, "labeler",
		gv.WithResource(resource), r.subresource, r.op, opts, false, &user.DefaultInfo{Name: r.user})
}

// admit runs the request through the plugin: nil if admitted, else the refusal, and the
// warnings the Warn binding gave.
func admit(t *testing.T, p *validating.Plugin, r pluginReq) (error, []string) {
	t.Helper()
	var w warnings
	ctx := warning.WithWarningRecorder(context.Background(), &w)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := p.Validate(ctx, r.attributes(), admission.NewObjectInterfacesFromScheme(runtime.NewScheme()))
	return err, w
}

// spec is a Plugin's spec granting perms (group, resources, verbs, as abi.Permission), with
// more settings in extra.
func spec(module string, perms [][3]any, extra map[string]any) map[string]any {
	ps := []any{}
	for _, p := range perms {
		ps = append(ps, map[string]any{"group": p[0], "resources": toAny(p[1].([]string)), "verbs": toAny(p[2].([]string))})
	}
	s := map[string]any{"module": module, "serviceAccountName": "labeler", "permissions": ps}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func clusterSpec(module string, perms [][3]any, extra map[string]any) map[string]any {
	s := spec(module, perms, extra)
	delete(s, "serviceAccountName")
	s["serviceAccount"] = map[string]any{"namespace": "wasmrec-plugins", "name": "labeler"}
	return s
}

var configMapReader = [][3]any{{"", []string{"configmaps"}, []string{"get", "list", "watch"}}}

// refusedFor checks err is the policy's refusal (403 Forbidden) and names each of want.
func refusedFor(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted, want a refusal naming %q", want)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusForbidden || !strings.Contains(err.Error(), "plugin-grants.wasmrec.dev") {
		t.Fatalf("refused with %v, want the policy's 403", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not say %q: %v", w, err)
		}
	}
}

func TestAdmissionPolicy(t *testing.T) {
	readAll := []string{"get", "list", "watch"}
	authz := &rbac{rights: map[string][]right{
		// alice reads and writes ConfigMaps in team-a and reads Deployments there; she may not
		// touch Secrets, and holds no wildcard.
		"alice": {
			{"get", "", "configmaps", "team-a", ""}, {"list", "", "configmaps", "team-a", ""}, {"watch", "", "configmaps", "team-a", ""},
			{"patch", "", "configmaps", "team-a", ""},
			{"get", "apps", "deployments", "team-a", ""}, {"list", "apps", "deployments", "team-a", ""},
			{"update", "apps", "deployments", "team-a", ""},
			// the ServiceAccount her Plugins act as
			{"impersonate", "", "serviceaccounts", "team-a", "labeler"}, {"impersonate", "", "serviceaccounts", "team-b", "labeler"},
		},
		// carol holds what alice holds on ConfigMaps, cluster-wide, and may impersonate one
		// ServiceAccount.
		"carol": {
			{"get", "", "configmaps", "", ""}, {"list", "", "configmaps", "", ""}, {"watch", "", "configmaps", "", ""},
			{"impersonate", "", "serviceaccounts", "wasmrec-plugins", "labeler"},
		},
		// dave holds every right in team-a (an admin of it with "*" on "*"), none elsewhere.
		"dave": {{"*", "*", "*", "team-a", ""}, {"impersonate", "", "serviceaccounts", "team-b", "labeler"}},
		// root is a cluster admin.
		"root": {{"*", "*", "*", "", ""}},
		// erin holds get on every resource of the core group in team-a ("*"), and on
		// deployments/status of apps.
		"erin": {{"get", "", "*", "team-a", ""}, {"update", "apps", "deployments/status", "team-a", ""}, {"impersonate", "", "serviceaccounts", "team-a", "labeler"}},
		// bob may act as the ServiceAccount, and holds nothing else.
		"bob": {{"impersonate", "", "serviceaccounts", "team-a", "labeler"}},
		// frank holds every right granted below in team-a, but may not act as its ServiceAccount.
		"frank": {{"get", "", "configmaps", "team-a", ""}},
	}}
	p := admissionPlugin(t, authz)
	const module = "oci://registry.example/labeler:v1"

	t.Run("a requester who holds every right granted", func(t *testing.T) {
		authz.takeChecks()
		err, w := admit(t, p, pluginReq{op: admission.Create, user: "alice", namespace: "team-a",
			spec: spec(module, [][3]any{{"", []string{"configmaps"}, []string{"get", "list", "watch", "patch"}}, {"apps", []string{"deployments"}, []string{"get", "list"}}}, nil)})
		if err != nil || len(w) > 0 {
			t.Fatalf("refused: %v (warnings %q)", err, w)
		}
		// One check for the wildcard, then one per right (the two bindings share them).
		checks := authz.takeChecks()
		if len(checks) != 8 || !slices.Contains(checks, "alice patch /configmaps team-a ") || !slices.Contains(checks, "alice * */* team-a ") ||
			!slices.Contains(checks, "alice impersonate /serviceaccounts team-a labeler") {
			t.Errorf("checks %q, want the wildcard, impersonation and each of the 6 rights in team-a", checks)
		}
	})

	t.Run("a Plugin acts only as a ServiceAccount its author may impersonate", func(t *testing.T) {
		err, w := admit(t, p, pluginReq{op: admission.Create, user: "frank", namespace: "team-a",
			spec: spec(module, [][3]any{{"", []string{"configmaps"}, []string{"get"}}}, nil)})
		refusedFor(t, err, "frank may not: impersonate core/serviceaccounts team-a/labeler",
			"A Plugin acts as its spec.serviceAccountName: ask an admin of team-a for the right to impersonate it")
		if len(w) != 1 {
			t.Errorf("warnings %q, want the impersonation alone", w)
		}
	})

	t.Run("one verb missing", func(t *testing.T) {
		err, w := admit(t, p, pluginReq{op: admission.Create, user: "alice", namespace: "team-a",
			spec: spec(module, [][3]any{{"", []string{"configmaps"}, []string{"get", "list", "watch", "delete"}}}, nil)})
		refusedFor(t, err, "alice may not: delete core/configmaps in team-a",
			"ask an admin of team-a for the right, or drop it from spec.permissions")
		if len(w) != 1 || !strings.Contains(w[0], "alice may not: delete core/configmaps in team-a") {
			t.Errorf("warnings %q, want one naming the delete", w)
		}
	})

	t.Run("every right missing is a warning, the first is the refusal", func(t *testing.T) {
		err, w := admit(t, p, pluginReq{op: admission.Create, user: "alice", namespace: "team-a",
			spec: spec(module, [][3]any{{"", []string{"secrets"}, readAll}, {"", []string{"configmaps"}, readAll}}, nil)})
		refusedFor(t, err, "alice may not: get core/secrets in team-a")
		var named []string
		for _, s := range w {
			named = append(named, s[strings.Index(s, "alice may not: "):strings.Index(s, ". A Plugin")])
		}
		want := []string{"alice may not: get core/secrets in team-a", "alice may not: list core/secrets in team-a", "alice may not: watch core/secrets in team-a"}
		if !slices.Equal(named, want) {
			t.Errorf("warnings name %q, want %q", named, want)
		}
	})

	t.Run("the * resource takes the wildcard itself", func(t *testing.T) {
		// alice may get ConfigMaps and Deployments, but not every resource.
		err, _ := admit(t, p, pluginReq{op: admission.Create, user: "alice", namespace: "team-a",
			spec: spec(module, [][3]any{{"", []string{"*"}, []string{"get"}}}, nil)})
		refusedFor(t, err, "alice may not: get core/* in team-a")
		err, _ = admit(t, p, pluginReq{op: admission.Create, user: "erin", namespace: "team-a",
			spec: spec(module, [][3]any{{"", []string{"*"}, []string{"get"}}, {"", []string{"secrets"}, []string{"get"}}}, nil)})
		if err != nil {
			t.Errorf("erin holds get on * in team-a, refused: %v", err)
		}
	})

	t.Run("a subresource is its own right", func(t *testing.T) {
		authz.takeChecks()
		status := [][3]any{{"apps", []string{"deployments/status"}, []string{"update"}}}
		err, _ := admit(t, p, pluginReq{op: admission.Create, user: "alice", namespace: "team-a", spec: spec(module, status, nil)})
		refusedFor(t, err, "alice may not: update apps/deployments/status in team-a")
		if checks := authz.takeChecks(); !slices.Contains(checks, "alice update apps/deployments/status team-a ") {
			t.Errorf("checks %q, want update of deployments, subresource status", checks)
		}
		if err, _ := admit(t, p, pluginReq{op: admission.Create, user: "erin", namespace: "team-a", spec: spec(module, status, nil)}); err != nil {
			t.Errorf("erin may update deployments/status, refused: %v", err)
		}
	})

	t.Run("rights are checked in the Plugin's namespace", func(t *testing.T) {
		err, _ := admit(t, p, pluginReq{op: admission.Create, user: "alice", namespace: "team-b", spec: spec(module, configMapReader, nil)})
		refusedFor(t, err, "alice may not: get core/configmaps in team-b", "ask an admin of team-b")
		// An admin of team-a with every right there passes with one check, and only there.
		authz.takeChecks()
		big := [][3]any{{"", []string{"configmaps", "secrets", "services", "pods", "events"}, []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}
		if err, _ := admit(t, p, pluginReq{op: admission.Create, user: "dave", namespace: "team-a", spec: spec(module, big, nil)}); err != nil {
			t.Errorf("dave holds every right in team-a, refused: %v", err)
		}
		if checks := authz.takeChecks(); len(checks) != 1 {
			t.Errorf("checks %q, want the wildcard alone", checks)
		}
		err, _ = admit(t, p, pluginReq{op: admission.Create, user: "dave", namespace: "team-b", spec: spec(module, configMapReader, nil)})
		refusedFor(t, err, "dave may not: get core/configmaps in team-b")
	})

	t.Run("a ClusterPlugin needs the rights cluster-wide and impersonation", func(t *testing.T) {
		// alice holds the reads in team-a only.
		err, w := admit(t, p, pluginReq{op: admission.Create, user: "alice", spec: clusterSpec(module, configMapReader, nil)})
		refusedFor(t, err, "alice may not: impersonate core/serviceaccounts wasmrec-plugins/labeler", "ask a cluster admin")
		if len(w) != 4 || !strings.Contains(w[1], "alice may not: get core/configmaps cluster-wide") {
			t.Errorf("warnings %q, want impersonation and the three reads cluster-wide", w)
		}
		// In spec.namespaces, each namespace is checked.
		err, w = admit(t, p, pluginReq{op: admission.Create, user: "alice",
			spec: clusterSpec(module, configMapReader, map[string]any{"namespaces": []any{"team-a", "team-b"}})})
		refusedFor(t, err, "impersonate")
		if len(w) != 4 || !strings.Contains(w[1], "alice may not: get core/configmaps in team-b") {
			t.Errorf("warnings %q, want impersonation and the three reads in team-b", w)
		}
		// carol holds the reads cluster-wide and may impersonate wasmrec-plugins/labeler.
		if err, _ := admit(t, p, pluginReq{op: admission.Create, user: "carol", spec: clusterSpec(module, configMapReader, nil)}); err != nil {
			t.Errorf("carol, refused: %v", err)
		}
		other := clusterSpec(module, configMapReader, nil)
		other["serviceAccount"] = map[string]any{"namespace": "wasmrec-plugins", "name": "admin"}
		err, _ = admit(t, p, pluginReq{op: admission.Create, user: "carol", spec: other})
		refusedFor(t, err, "carol may not: impersonate core/serviceaccounts wasmrec-plugins/admin")
		// An admin of team-a is no cluster admin.
		err, _ = admit(t, p, pluginReq{op: admission.Create, user: "dave", spec: clusterSpec(module, configMapReader, map[string]any{"namespaces": []any{"team-a"}})})
		refusedFor(t, err, "dave may not: impersonate")
		if err, _ := admit(t, p, pluginReq{op: admission.Create, user: "root", spec: clusterSpec(module, configMapReader, nil)}); err != nil {
			t.Errorf("a cluster admin, refused: %v", err)
		}
	})

	t.Run("updates", func(t *testing.T) {
		old := spec(module, configMapReader, map[string]any{"paused": false})
		// bob holds nothing: he may pause and resume, and relabel, but not change the module.
		authz.takeChecks()
		for _, paused := range []any{true, nil} {
			now := spec(module, configMapReader, nil)
			if paused != nil {
				now["paused"] = paused
			}
			if err, _ := admit(t, p, pluginReq{op: admission.Update, user: "bob", namespace: "team-a", spec: now, old: old}); err != nil {
				t.Errorf("an update of paused only (to %v), refused: %v", paused, err)
			}
		}
		if err, _ := admit(t, p, pluginReq{op: admission.Update, user: "bob", namespace: "team-a", spec: old, old: old, labels: map[string]any{"team": "a"}}); err != nil {
			t.Errorf("an update of labels only, refused: %v", err)
		}
		if checks := authz.takeChecks(); len(checks) > 0 {
			t.Errorf("updates that grant nothing asked %q", checks)
		}
		err, _ := admit(t, p, pluginReq{op: admission.Update, user: "bob", namespace: "team-a", spec: spec(module+"2", configMapReader, nil), old: old})
		refusedFor(t, err, "bob may not: get core/configmaps in team-a")
		// Another setting changes what the plugin does: it is checked too.
		err, _ = admit(t, p, pluginReq{op: admission.Update, user: "bob", namespace: "team-a", spec: spec(module, configMapReader, map[string]any{"paused": false, "shards": int64(4)}), old: old})
		refusedFor(t, err, "bob may not")
		// alice holds the reads.
		if err, _ := admit(t, p, pluginReq{op: admission.Update, user: "alice", namespace: "team-a", spec: spec(module+"2", configMapReader, nil), old: old}); err != nil {
			t.Errorf("alice changing the module, refused: %v", err)
		}
	})

	t.Run("the status subresource and deletes are never checked", func(t *testing.T) {
		old := spec(module, configMapReader, nil)
		if err, _ := admit(t, p, pluginReq{op: admission.Update, user: "bob", namespace: "team-a", subresource: "status",
			spec: spec(module+"2", [][3]any{{"", []string{"secrets"}, []string{"get"}}}, nil), old: old}); err != nil {
			t.Errorf("a status write, refused: %v", err)
		}
		if err, _ := admit(t, p, pluginReq{op: admission.Delete, user: "bob", namespace: "team-a", spec: old}); err != nil {
			t.Errorf("a delete, refused: %v", err)
		}
	})

	t.Run("at most 24 rights for one who does not hold every right", func(t *testing.T) {
		// carol holds every verb on 4 resources cluster-wide, and impersonation: a ClusterPlugin,
		// so that the two checks beyond the rights count too.
		authz.rights["carol"] = append(authz.rights["carol"], right{"*", "", "r1", "", ""}, right{"*", "", "r2", "", ""}, right{"*", "", "r3", "", ""}, right{"*", "", "r4", "", ""})
		verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
		max := [][3]any{{"", []string{"r1", "r2", "r3"}, verbs}, {"", []string{"r4"}, verbs[:3]}}
		if err, _ := admit(t, p, pluginReq{op: admission.Create, user: "carol", spec: clusterSpec(module, max, nil)}); err != nil {
			t.Errorf("24 rights held, refused: %v", err)
		}
		// The same rights twice are one.
		twice := append(slices.Clone(max), max...)
		if err, _ := admit(t, p, pluginReq{op: admission.Create, user: "carol", spec: clusterSpec(module, twice, nil)}); err != nil {
			t.Errorf("24 rights held, each named twice, refused: %v", err)
		}
		over := [][3]any{{"", []string{"r1", "r2", "r3"}, verbs}, {"", []string{"r4"}, verbs[:4]}}
		err, _ := admit(t, p, pluginReq{op: admission.Create, user: "carol", spec: clusterSpec(module, over, nil)})
		refusedFor(t, err, "carol asks to grant 25 rights", "at most 24", "cluster-wide")
		if err, _ := admit(t, p, pluginReq{op: admission.Create, user: "root", spec: clusterSpec(module, over, nil)}); err != nil {
			t.Errorf("a cluster admin with 25 rights, refused: %v", err)
		}
	})
}

// Each validation of a right is the same expression and message with its own index, and
// there are as many as the limit the first validation says.
func TestAdmissionPolicySlotsAreAlike(t *testing.T) {
	policy, bindings, err := pluginobjects.ParseAdmissionPolicy()
	if err != nil {
		t.Fatal(err)
	}
	vs := policy.Spec.Validations
	const first = 2 // the limit, then impersonation
	slots := vs[first:]
	limit := fmt.Sprintf("size(variables.rights) <= %d", len(slots))
	if len(slots) != 24 || !strings.Contains(vs[0].Expression, limit) || !strings.Contains(vs[0].MessageExpression, fmt.Sprintf("at most %d", len(slots))) {
		t.Errorf("%d validations of rights; the first validation says %q", len(slots), vs[0].Expression)
	}
	for i, v := range slots {
		want := strings.ReplaceAll(slots[0].Expression, "[0]", fmt.Sprintf("[%d]", i))
		want = strings.ReplaceAll(want, "<= 0", fmt.Sprintf("<= %d", i))
		wantMsg := strings.ReplaceAll(slots[0].MessageExpression, "[0]", fmt.Sprintf("[%d]", i))
		if v.Expression != want || v.MessageExpression != wantMsg || !reflect.DeepEqual(v.Reason, slots[0].Reason) {
			t.Errorf("validation of right %d:\n%s\n%s\nwant\n%s\n%s", i, v.Expression, v.MessageExpression, want, wantMsg)
		}
	}
	if *policy.Spec.FailurePolicy != "Fail" {
		t.Errorf("failurePolicy %s, want Fail", *policy.Spec.FailurePolicy)
	}
	var actions []string
	for _, b := range bindings {
		if b.Spec.PolicyName != policy.Name {
			t.Errorf("binding %s binds %s", b.Name, b.Spec.PolicyName)
		}
		for _, a := range b.Spec.ValidationActions {
			actions = append(actions, string(a))
		}
	}
	if !slices.Equal(actions, []string{"Deny", "Warn"}) {
		t.Errorf("bindings' actions %q, want Deny, then Warn", actions)
	}
}

// Why there are 24 validations of rights: the API server's cost budget. The policy made to check
// up to 27 rights admits a ClusterPlugin of 26 (28 authorization checks with the wildcard and
// impersonation), and runs out of budget at 27.
func TestAuthorizationChecksRunOutOfBudgetPast28(t *testing.T) {
	policy, bindings, err := pluginobjects.ParseAdmissionPolicy()
	if err != nil {
		t.Fatal(err)
	}
	vs := policy.Spec.Validations
	vs[0].Expression = strings.ReplaceAll(vs[0].Expression, "<= 24", "<= 27")
	for i := 24; i < 27; i++ {
		v := *vs[2].DeepCopy()
		v.Expression = strings.ReplaceAll(strings.ReplaceAll(v.Expression, "[0]", fmt.Sprintf("[%d]", i)), "<= 0", fmt.Sprintf("<= %d", i))
		v.MessageExpression = strings.ReplaceAll(v.MessageExpression, "[0]", fmt.Sprintf("[%d]", i))
		vs = append(vs, v)
	}
	policy.Spec.Validations = vs
	authz := &rbac{rights: map[string][]right{"carol": {
		{"impersonate", "", "serviceaccounts", "wasmrec-plugins", "labeler"},
		{"*", "", "r1", "", ""}, {"*", "", "r2", "", ""}, {"*", "", "r3", "", ""}, {"*", "", "r4", "", ""}}}}
	p := admissionPluginOf(t, authz, policy, bindings)
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	for _, n := range []int{26, 27} {
		perms := [][3]any{{"", []string{"r1", "r2", "r3"}, verbs}, {"", []string{"r4"}, verbs[:n-21]}}
		err, _ := admit(t, p, pluginReq{op: admission.Create, user: "carol", spec: clusterSpec("m", perms, nil)})
		switch {
		case n == 26 && err != nil:
			t.Errorf("26 rights held, refused: %v", err)
		case n == 27 && (err == nil || !strings.Contains(err.Error(), "running out of cost budget")):
			t.Errorf("27 rights held = %v, want the budget run out (if the API server now charges less, raise the number of validations)", err)
		}
	}
}
