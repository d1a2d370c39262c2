package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

// warningLog keeps the warnings the API server answers a client with.
type warningLog struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen
	w.seen = nil
	return s
}

// pluginOf is a Plugin (namespace set) or a ClusterPlugin granting perms, each
// "group resource verb,verb...".
func pluginOf(namespace, name string, perms ...string) *unstructured.Unstructured {
	ps := []any{}
	for _, p := range perms {
		f := strings.Fields(p)
		verbs := []any{}
		for _, v := range strings.Split(f[2], ",") {
			verbs = append(verbs, v)
		}
		group := f[0]
		if group == "core" {
			group = ""
		}
		ps = append(ps, map[string]any{"group": group, "resources": []any{f[1]}, "verbs": verbs})
	}
	spec := map[string]any{"module": "oci://registry.example/" + name + ":v1", "permissions": ps}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wasmrec.dev/v1alpha1", "kind": "Plugin",
		"metadata": map[string]any{"name": name}, "spec": spec}}
	if namespace == "" {
		u.SetKind("ClusterPlugin")
		spec["serviceAccount"] = map[string]any{"namespace": "wasmrec-plugins", "name": name}
	} else {
		u.SetNamespace(namespace)
		spec["serviceAccountName"] = name
	}
	return u
}

// A tenant runs a plugin in her namespace with the rights she holds there, and no more: the
// admission policy refuses a Plugin granting what she may not do herself, RBAC a Plugin in
// another namespace, the schema a spec with a field it does not know (with fieldValidation
// Strict), and the policy a ClusterPlugin, whose rights she holds nowhere cluster-wide. The
// host's status writes are never checked.
func TestAdmission(t *testing.T) {
	ctx := context.Background()
	installPluginCRD(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{"team-a", "team-b"} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	}
	// alice may create, update and get Plugins in team-a, and read ConfigMaps there, not
	// Secrets; she may create ClusterPlugins, so that the policy, not RBAC, answers those.
	_, err := cs.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "plugin-author"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"wasmrec.dev"}, Resources: []string{"plugins"}, Verbs: []string{"create", "update", "get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		// The ServiceAccounts her Plugins act as, and no other.
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"secrets-reader", "configmap-reader", "typo", "uninterruptible"}},
	}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "plugin-author"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{})
	must(t, err)
	// hostw writes the status of Plugins, and nothing else.
	for _, who := range []struct {
		name  string
		rules []rbacv1.PolicyRule
	}{
		{"alice", []rbacv1.PolicyRule{{APIGroups: []string{"wasmrec.dev"}, Resources: []string{"clusterplugins"}, Verbs: []string{"create"}}}},
		{"hostw", []rbacv1.PolicyRule{{APIGroups: []string{"wasmrec.dev"}, Resources: []string{"plugins/status"}, Verbs: []string{"patch"}}}},
	} {
		name := "e2e-admission-" + who.name
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: who.rules}, metav1.CreateOptions{})
		must(t, err)
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: who.name}}}, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
			_ = cs.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		})
	}
	aliceCfg, err := cp.AddUser("alice")
	must(t, err)
	warned := &warningLog{}
	aliceCfg.WarningHandler = warned
	alice := dynamic.NewForConfigOrDie(aliceCfg)
	plugins := alice.Resource(pluginobjects.GVR)

	// (b) A Plugin granting what alice may not do is refused, naming it and what to do. The
	// API server enforces the policy (and RBAC the Role) once its informers have them.
	var refusal error
	eventually(t, 30*time.Second, "the policy refusing a Plugin that grants get on secrets", func() error {
		_, refusal = plugins.Namespace("team-a").Create(ctx, pluginOf("team-a", "secrets-reader", "core secrets get", "core configmaps get"), metav1.CreateOptions{})
		if refusal == nil {
			_ = dyn(t).Resource(pluginobjects.GVR).Namespace("team-a").Delete(ctx, "secrets-reader", metav1.DeleteOptions{})
			return errors.New("admitted")
		}
		if !strings.Contains(refusal.Error(), "plugin-grants.wasmrec.dev") {
			return refusal
		}
		return nil
	})
	if !apierrors.IsForbidden(refusal) || !strings.Contains(refusal.Error(), "alice may not: get core/secrets in team-a") ||
		!strings.Contains(refusal.Error(), "ask an admin of team-a for the right, or drop it from spec.permissions") {
		t.Errorf("the refusal = %v, want a 403 naming get on secrets in team-a and what to do", refusal)
	}
	if w := warned.take(); len(w) != 1 || !strings.Contains(w[0], "get core/secrets in team-a") {
		t.Errorf("warnings %q, want one naming get on secrets (alice may get configmaps)", w)
	}

	// (a) One granting what she holds is admitted; so is pausing it, but not a change granting
	// more.
	reader := pluginOf("team-a", "configmap-reader", "core configmaps get,list,watch")
	_, err = plugins.Namespace("team-a").Create(ctx, reader, metav1.CreateOptions{})
	must(t, err)
	if w := warned.take(); len(w) > 0 {
		t.Errorf("an admitted Plugin came with warnings %q", w)
	}
	update := func(change func(spec map[string]any)) error {
		u, err := plugins.Namespace("team-a").Get(ctx, "configmap-reader", metav1.GetOptions{})
		must(t, err)
		change(u.Object["spec"].(map[string]any))
		_, err = plugins.Namespace("team-a").Update(ctx, u, metav1.UpdateOptions{})
		return err
	}
	must(t, update(func(spec map[string]any) { spec["paused"] = true }))
	err = update(func(spec map[string]any) {
		spec["permissions"] = pluginOf("team-a", "x", "core configmaps get,list,watch,delete").Object["spec"].(map[string]any)["permissions"]
	})
	if !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), "alice may not: delete core/configmaps in team-a") {
		t.Errorf("an update granting delete = %v, want the policy's refusal naming it", err)
	}
	warned.take()

	// (f) A Plugin acts as the ServiceAccount it names: she may name only one she may
	// impersonate, or she would act, audited as it, as any ServiceAccount of her namespace.
	_, err = plugins.Namespace("team-a").Create(ctx, pluginOf("team-a", "deployer", "core configmaps get"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), "alice may not: impersonate core/serviceaccounts team-a/deployer. A Plugin acts as its spec.serviceAccountName") {
		t.Errorf("a Plugin acting as a ServiceAccount alice may not impersonate = %v, want the policy's refusal naming it", err)
	}
	warned.take()

	// (c) RBAC keeps her out of team-b before the policy is asked.
	_, err = plugins.Namespace("team-b").Create(ctx, pluginOf("team-b", "configmap-reader", "core configmaps get"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), `cannot create resource "plugins"`) || strings.Contains(fmt.Sprint(err), "plugin-grants") {
		t.Errorf("a Plugin in team-b = %v, want RBAC's refusal", err)
	}

	// (d) A field the schema does not know is refused with fieldValidation Strict (kubectl's
	// default); by default the API server drops it, and warns.
	unknown := pluginOf("team-a", "typo", "core configmaps get")
	must(t, unstructured.SetNestedField(unknown.Object, "1m", "spec", "pollIntervall"))
	_, err = plugins.Namespace("team-a").Create(ctx, unknown, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if !apierrors.IsBadRequest(err) || !strings.Contains(fmt.Sprint(err), `unknown field "spec.pollIntervall"`) {
		t.Errorf("a spec with an unknown field, Strict = %v, want it refused naming the field", err)
	}
	created, err := plugins.Namespace("team-a").Create(ctx, unknown, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	must(t, err)
	if _, found, _ := unstructured.NestedFieldNoCopy(created.Object, "spec", "pollIntervall"); found {
		t.Error("the unknown field was kept")
	}
	if w := warned.take(); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, `unknown field "spec.pollIntervall"`) }) {
		t.Errorf("warnings %q, want one naming the unknown field", w)
	}
	// interruptible is the operator's alone.
	interruptible := pluginOf("team-a", "uninterruptible", "core configmaps get")
	must(t, unstructured.SetNestedField(interruptible.Object, false, "spec", "interruptible"))
	_, err = plugins.Namespace("team-a").Create(ctx, interruptible, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if !apierrors.IsBadRequest(err) || !strings.Contains(fmt.Sprint(err), `unknown field "spec.interruptible"`) {
		t.Errorf("a Plugin setting interruptible = %v, want it refused", err)
	}

	// (e) A ClusterPlugin acts cluster-wide: she holds the reads in team-a only, and may not
	// impersonate its ServiceAccount.
	_, err = alice.Resource(pluginobjects.ClusterGVR).Create(ctx, pluginOf("", "alice-reader", "core configmaps get,list,watch"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), "alice may not: impersonate core/serviceaccounts wasmrec-plugins/alice-reader") {
		t.Errorf("a ClusterPlugin by alice = %v, want the policy's refusal naming impersonation", err)
	}
	if w := warned.take(); len(w) != 4 || !strings.Contains(w[1], "alice may not: get core/configmaps cluster-wide") {
		t.Errorf("warnings %q, want impersonation and the three reads cluster-wide", w)
	}
	scoped := pluginOf("", "alice-reader", "core configmaps get,list,watch")
	must(t, unstructured.SetNestedStringSlice(scoped.Object, []string{"team-a"}, "spec", "namespaces"))
	_, err = alice.Resource(pluginobjects.ClusterGVR).Create(ctx, scoped, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), "impersonate") {
		t.Errorf("a ClusterPlugin by alice in team-a alone = %v, want the policy's refusal naming impersonation", err)
	}
	if w := warned.take(); len(w) != 1 {
		t.Errorf("warnings %q, want impersonation alone (alice holds the reads in team-a)", w)
	}

	// The host's status writes are not checked: hostw may grant nothing, and writes status.
	hostCfg, err := cp.AddUser("hostw")
	must(t, err)
	_, err = dynamic.NewForConfigOrDie(hostCfg).Resource(pluginobjects.GVR).Namespace("team-a").Patch(ctx, "configmap-reader", types.MergePatchType,
		[]byte(`{"status":{"observedGeneration":2,"conditions":[]}}`), metav1.PatchOptions{}, "status")
	must(t, err)
	// And an admin passes with everything.
	admin := dyn(t)
	_, err = admin.Resource(pluginobjects.ClusterGVR).Create(ctx, pluginOf("", "admin-reader", "core secrets get,list,watch", "apps deployments *"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "Unsupported value") {
		t.Errorf("verb * = %v, want the schema's refusal (the ABI knows no verb *)", err)
	}
	_, err = admin.Resource(pluginobjects.ClusterGVR).Create(ctx, pluginOf("", "admin-reader", "core secrets get,list,watch", "apps deployments/status update"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	must(t, err)
	// The idle timeouts are 0s or at least 1s, as the host's own check has them: the schema
	// refuses a moment, which would otherwise reach the host and unload a serving plugin.
	for _, tc := range []struct{ field, value, want string }{
		{"idleTimeout", "10ms", "use 1s or more"},
		{"codeIdleTimeout", "999ms", "use 1s or more"},
		{"idleTimeout", "0s", ""},
		{"codeIdleTimeout", "0", ""},
		{"idleTimeout", "1h30m", ""},
	} {
		p := pluginOf("", "admin-idle", "core configmaps get")
		must(t, unstructured.SetNestedField(p.Object, tc.value, "spec", tc.field))
		_, err := admin.Resource(pluginobjects.ClusterGVR).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %s = %v, want %q", tc.field, tc.value, err, cmp.Or(tc.want, "admitted"))
		}
	}
}

var _ rest.WarningHandler = (*warningLog)(nil)
