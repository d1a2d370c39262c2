package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
	"github.com/wasmrec/wasmrec/host/wasm"
)

// tenant is a user with rights in one namespace only, as a team gets them: Plugin objects, reads
// of every core resource there (so that it may grant a plugin "*"), impersonation of the
// ServiceAccounts her plugins act as, and nothing elsewhere.
type tenant struct {
	name string
	ns   string
	dyn  dynamic.Interface
}

func newTenant(t testing.TB, name, ns string, actAs ...string) *tenant {
	t.Helper()
	rc, err := cp.AddUser(name)
	must(t, err)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"wasmrec.dev"}, Resources: []string{"plugins"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
	}
	if len(actAs) > 0 { // the ServiceAccounts her Plugins may act as
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}, ResourceNames: actAs})
	}
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}}, metav1.CreateOptions{})
	must(t, err)
	return &tenant{name: name, ns: ns, dyn: dynamic.NewForConfigOrDie(rc)}
}

// plugin creates a Plugin in the tenant's namespace, as the tenant.
func (tn *tenant) plugin(name string, spec map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": pluginobjects.GVK.GroupVersion().String(), "kind": pluginobjects.GVK.Kind,
		"metadata": map[string]any{"name": name, "namespace": tn.ns}, "spec": spec}}
	_, err := tn.dyn.Resource(pluginobjects.GVR).Namespace(tn.ns).Create(context.Background(), u, metav1.CreateOptions{})
	return err
}

// serviceAccount makes a ServiceAccount in ns allowed only rules.
func serviceAccount(t testing.TB, ns, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "sa-" + name}, Rules: rules}, metav1.CreateOptions{})
	must(t, err)
	serviceAccountBinding(t, ns, name)
}

// serviceAccountBinding binds the ServiceAccount name of ns to its Role.
func serviceAccountBinding(t testing.TB, ns, name string) {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(cfg).RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sa-" + name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "sa-" + name}}, metav1.CreateOptions{})
	must(t, err)
}

// pluginCondition reads a Plugin's condition: status and message.
func pluginCondition(t testing.TB, ns, name, typ string) (string, string) {
	t.Helper()
	return objectCondition(t, pluginobjects.GVR, ns, name, typ)
}

// objectCondition reads a plugin object's condition: status and message (the error, if the
// object cannot be read).
func objectCondition(t testing.TB, gvr schema.GroupVersionResource, ns, name, typ string) (string, string) {
	t.Helper()
	u, err := dyn(t).Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["message"])
		}
	}
	return "", ""
}

// A tenant who may read everything in her own namespace, and nothing elsewhere, creates a Plugin
// whose module reads Secrets under a "*" grant. Its plugin acts as the ServiceAccount she names,
// which may read ConfigMaps only: it reads no Secret of her namespace (its RBAC says no), none of
// another namespace (a Plugin is confined to its own), and the refusals say which wall stopped
// it. She cannot touch another team's Plugin; the operator's bounds and sources refuse what
// exceeds them, and a refused source tells nothing of the host's files.
func TestATenantsPluginGetsNoMoreThanItsServiceAccount(t *testing.T) {
	t.Parallel() // see e2e/doc.go: what may run beside others
	ctx := context.Background()
	installPluginCRD(t)
	teamA, teamB, prod := namespace(t), namespace(t), namespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, s := range []struct{ ns, name string }{{prod, "db-password"}, {teamA, "token"}} {
		_, err := cs.CoreV1().Secrets(s.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.name}, StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{})
		must(t, err)
	}
	alice := newTenant(t, "alice-"+teamA, teamA, "reader")
	serviceAccount(t, teamA, "reader",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}})

	dir := t.TempDir() // the only source the operator allows
	module := filepath.Join(dir, "tenant.wasm")
	writeModule(t, module, module2(t, "tenant"))
	logs := &logLines{}
	mgr := startManagerWith(t, cfg, manager.Options{Logger: logs.logger()})
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Logger: logs.logger()})
	must(t, err)
	t.Cleanup(host.Close)
	limit := resource.MustParse("256Mi")
	nsBudget := resource.MustParse("300Mi") // two plugins of the default 128Mi
	res, err := pluginobjects.New(host, pluginobjects.Options{Policy: plugin.ObjectPolicy{Sources: []string{dir}, MaxMemoryLimit: &limit, NamespaceMemoryBudget: &nsBudget}})
	must(t, err)
	must(t, mgr.Add(res))

	star := []any{map[string]any{"group": "", "resources": []any{"*"}, "verbs": []any{"get", "list", "watch"}}}
	must(t, alice.plugin("peek", map[string]any{"module": module, "serviceAccountName": "reader", "permissions": star}))
	eventually(t, 30*time.Second, "peek Ready", func() error {
		if s, m := pluginCondition(t, teamA, "peek", "Ready"); s != "True" {
			return fmt.Errorf("Ready=%s: %s", s, m)
		}
		return nil
	})
	for _, name := range []string{"get." + prod + ".db-password", "get." + teamA + ".token", "list." + teamA, "list." + prod} {
		_, err := cs.CoreV1().ConfigMaps(teamA).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"wasmrec.dev/tenant": ""}}}, metav1.CreateOptions{})
		must(t, err)
	}
	user := "system:serviceaccount:" + teamA + ":reader"
	for name, want := range map[string]string{
		"get." + prod + ".db-password": `namespace \"` + prod + `\" is outside plugin \"` + teamA + `.peek\"'s namespaces`,
		"list." + prod:                 `namespace \"` + prod + `\" is outside plugin`,
		"get." + teamA + ".token":      "the plugin's ServiceAccount's RBAC does not let " + user + " get core/secrets in " + teamA,
		"list." + teamA:                "the plugin's ServiceAccount's RBAC does not let " + user + " list core/secrets in " + teamA,
	} {
		line := logs.waitFor(t, 30*time.Second, name+" returned status")
		if !strings.Contains(line, want) {
			t.Errorf("%s: the guest was told\n%s\nwant it to say %q", name, line, want)
		}
		t.Logf("%s: %s", name, line[strings.Index(line, "returned status"):])
		if strings.Contains(line, "hunter2") || strings.Contains(line, base64.StdEncoding.EncodeToString([]byte("hunter2"))) {
			t.Errorf("%s: the guest read the Secret: %s", name, line)
		}
	}

	// The ServiceAccount's Role goes: within the review period (30 s) the plugin stops, Degraded,
	// naming what it may no longer read.
	must(t, cs.RbacV1().RoleBindings(teamA).Delete(ctx, "sa-reader", metav1.DeleteOptions{}))
	revoked := time.Now()
	eventually(t, 45*time.Second, "peek stopped once its ServiceAccount may not read ConfigMaps", func() error {
		s, m := pluginCondition(t, teamA, "peek", "Degraded")
		if s != "True" || !strings.Contains(m, "list core/configmaps in "+teamA) {
			return fmt.Errorf("Degraded=%s: %s", s, m)
		}
		return nil
	})
	_, reason := pluginCondition(t, teamA, "peek", "Ready")
	t.Logf("stopped %s after its RoleBinding was deleted: %s", time.Since(revoked).Round(time.Second), reason)
	serviceAccountBinding(t, teamA, "reader") // given back: it starts again (checked at the end)

	// Another team's Plugin is out of her reach: RBAC refuses her before anything else.
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wasmrec.dev/v1alpha1", "kind": "Plugin",
		"metadata": map[string]any{"name": "theirs", "namespace": teamB}, "spec": map[string]any{"module": module, "serviceAccountName": "default", "paused": true, "permissions": []any{}}}}
	_, err = dyn(t).Resource(pluginobjects.GVR).Namespace(teamB).Create(ctx, other, metav1.CreateOptions{})
	must(t, err)
	_, err = alice.dyn.Resource(pluginobjects.GVR).Namespace(teamB).Patch(ctx, "theirs", types.MergePatchType, []byte(`{"spec":{"module":"oci://evil/x:v1"}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("alice patched team B's Plugin: %v", err)
	}

	// The operator's bounds: 1Gi past a 256Mi limit is refused, naming the limit.
	must(t, alice.plugin("big", map[string]any{"module": module, "serviceAccountName": "reader", "permissions": star, "memoryLimit": "1Gi"}))
	// A source outside the allowlist: refused without being touched, whether it exists or not.
	must(t, alice.plugin("probe-file", map[string]any{"module": "/etc/hostname", "serviceAccountName": "reader", "permissions": star}))
	must(t, alice.plugin("probe-none", map[string]any{"module": "/no/such/file.wasm", "serviceAccountName": "reader", "permissions": star}))
	must(t, alice.plugin("probe-net", map[string]any{"module": "oci://127.0.0.1:1/x:v1", "serviceAccountName": "reader", "permissions": star}))
	if m := degraded(t, teamA, "big", 30*time.Second); !strings.Contains(m, "spec.memoryLimit 1Gi is above the operator's limit of 256Mi") {
		t.Errorf("big: %s", m)
	}
	// A resync every second would reconcile all she sees every second: below the floor (1m).
	must(t, alice.plugin("resync", map[string]any{"module": module, "serviceAccountName": "reader", "permissions": star, "resyncPeriod": "1s"}))
	if m := degraded(t, teamA, "resync", 30*time.Second); !strings.Contains(m, "spec.resyncPeriod 1s is below the operator's floor of 1m0s (pluginObjects.minResyncPeriod") {
		t.Errorf("resync: %s", m)
	}
	file, none, net := degraded(t, teamA, "probe-file", 30*time.Second), degraded(t, teamA, "probe-none", 30*time.Second), degraded(t, teamA, "probe-net", 30*time.Second)
	if strings.ReplaceAll(file, "/etc/hostname", "X") != strings.ReplaceAll(strings.ReplaceAll(none, "/no/such/file.wasm", "X"), "probe-none", "probe-file") {
		t.Errorf("the status of a path that exists differs from one that does not:\n%s\n%s", file, none)
	}
	t.Logf("a source outside the allowlist: %s", net)

	// The namespace's budget: a second plugin fits, a third waits until one stops.
	for _, name := range []string{"second", "third"} {
		must(t, alice.plugin(name, map[string]any{"module": module, "serviceAccountName": "reader", "permissions": star}))
	}
	// 256Mi of instances, and the compiled code of those loaded (under a MiB each for this C
	// guest): peek, given its binding back above, and second may each still be loading.
	held := regexp.MustCompile(`the Plugins of ` + teamA + ` hold 25[678]Mi of the operator's budget of 300Mi for one namespace`)
	if m := degraded(t, teamA, "third", 30*time.Second); !held.MatchString(m) {
		t.Errorf("third: %s\nwant it to match %s", m, held)
	}
	must(t, alice.dyn.Resource(pluginobjects.GVR).Namespace(teamA).Delete(ctx, "second", metav1.DeleteOptions{}))
	for _, name := range []string{"third", "peek"} {
		eventually(t, 45*time.Second, name+" Ready", func() error {
			if s, m := pluginCondition(t, teamA, name, "Ready"); s != "True" {
				return fmt.Errorf("Ready=%s: %s", s, m)
			}
			return nil
		})
	}
	for _, m := range []string{file, none, net} {
		if !strings.Contains(m, "not from a source the operator allows") || strings.Contains(m, "no such file") || strings.Contains(m, "connection refused") {
			t.Errorf("a source outside the allowlist: %s", m)
		}
	}
}

// A plugin object whose instance grew to about 1 GiB gives it back when it is deleted: the
// host's resident memory returns to within 20% of what it was before the plugin came.
func TestDeletedPluginGivesItsMemoryBack(t *testing.T) {
	ctx := context.Background()
	installPluginCRD(t)
	ns := namespace(t)
	h := startHost(t, "plugins: []\npluginObjects: {sources: [/], maxMemoryLimit: 2Gi, memoryBudget: 4Gi}\n")
	h.waitOut(t, `msg="starting workers" controller=plugins`)
	rss := func() int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.cmd.Process.Pid))
		must(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
				return kb << 10
			}
		}
		t.Fatal("no VmRSS")
		return 0
	}
	time.Sleep(2 * time.Second) // the host settles
	before := rss()
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "hog"},
		"spec": map[string]any{"module": wasmFile(t, "testguests", "misbehave"), "namespaces": []any{ns},
			"memoryLimit": "1200Mi", "recycleAbove": "1200Mi",
			"permissions": []any{map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch"}}}}}}
	_, err := dyn(t).Resource(pluginGVR).Create(ctx, clusterPlugin(t, obj), metav1.CreateOptions{})
	must(t, err)
	misbehaving(t, ns, "hog-1000")
	h.waitOut(t, `msg="hogging 1000 MiB" plugin=hog`)
	peak := rss()
	if peak < before+900<<20 {
		t.Fatalf("RSS %d MiB with the plugin hogging 1000 MiB, %d MiB before: the guest's memory is not resident", peak>>20, before>>20)
	}
	must(t, dyn(t).Resource(pluginGVR).Delete(ctx, "hog", metav1.DeleteOptions{}))
	h.waitOut(t, `msg="plugin unloaded" logger=plugins plugin=hog`)
	var after int64
	eventually(t, 20*time.Second, "RSS back within 20% of before", func() error {
		if after = rss(); float64(after) > 1.2*float64(before) {
			return fmt.Errorf("RSS %d MiB, %d MiB before the plugin, %d MiB at its peak; the host's last lines:\n%s",
				after>>20, before>>20, peak>>20, tail(h.out.String(), 30))
		}
		return nil
	})
	t.Logf("host RSS: %d MiB before, %d MiB with the plugin hogging 1000 MiB, %d MiB after it was deleted", before>>20, peak>>20, after>>20)
}

// A tenant's second Plugin, whose field index the namespace's memory budget has no room for
// once both modules and their instances hold theirs, is Degraded IndexOverBudget, with an Event
// on it, both readable by the tenant; the first Plugin, whose index was kept before, is not. Once
// the first is deleted, the second's next list that tells values is kept, and it is Healthy.
// The budget is what the two hold, to the byte, and half a MiB: the index charges a MiB at a
// time.
func TestAFieldIndexOverTheNamespaceBudgetIsSaidOnThePlugin(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	alice := newTenant(t, "alice-"+ns, ns, "stamper")
	// A Plugin grants only what its author may do: her team's Deployments are hers to patch.
	_, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: alice.name}}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"}}, metav1.CreateOptions{})
	must(t, err)
	serviceAccount(t, ns, "stamper",
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}})
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: demo.WebConfig}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, demo.WebDeployment(ns), metav1.CreateOptions{})
	must(t, err)

	dir := t.TempDir() // the only source the operator allows
	module := filepath.Join(dir, "rollout.wasm")
	wasmBytes := mustRead(t, wasmFile(t, "plugins", "rollout"))
	writeModule(t, module, wasmBytes)
	const instance = 32 << 20
	code := int64(len(wasmBytes)) * wasm.CodeHeld
	nsBudget := resource.NewQuantity(2*(instance+code)+1<<20+1<<19, resource.BinarySI)
	objectsHost(t, plugin.ObjectPolicy{Sources: []string{dir}, NamespaceMemoryBudget: nsBudget}, &logLines{})

	spec := func() map[string]any {
		return map[string]any{"module": module, "serviceAccountName": "stamper", "memoryLimit": "32Mi", "maxConcurrentReconciles": int64(1),
			"permissions": []any{
				map[string]any{"group": "apps", "resources": []any{"deployments"}, "verbs": []any{"get", "list", "watch", "patch"}},
				map[string]any{"group": "", "resources": []any{"configmaps", "secrets"}, "verbs": []any{"get", "list", "watch"}},
				map[string]any{"group": "", "resources": []any{"events"}, "verbs": []any{"create"}},
			}}
	}
	hash := func() string { return configHash(cs, ns, "web") }
	// Each change of the ConfigMap reaches the Deployment through a map function, whose list of
	// Deployments through the index tells the host the values it computed.
	change := func(what string) {
		before := hash()
		_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, demo.WebConfig, types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":%q}}`, what), metav1.PatchOptions{})
		must(t, err)
		eventually(t, 30*time.Second, "the Deployment stamped for "+what, func() error {
			if h := hash(); h == before || h == "" {
				return fmt.Errorf("hash %q", h)
			}
			return nil
		})
	}
	condition := func(name, typ, status, reason string) {
		eventually(t, 30*time.Second, fmt.Sprintf("%s %s=%s %s", name, typ, status, reason), func() error {
			u, err := alice.dyn.Resource(pluginobjects.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m := c.(map[string]any)
				if m["type"] == typ {
					if m["status"] != status || m["reason"] != reason {
						return fmt.Errorf("%s=%v %v: %v", typ, m["status"], m["reason"], m["message"])
					}
					return nil
				}
			}
			return fmt.Errorf("no %s condition", typ)
		})
	}

	must(t, alice.plugin("first", spec()))
	condition("first", "Ready", "True", "Serving")
	change("2") // the first's index holds its first MiB
	must(t, alice.plugin("second", spec()))
	condition("second", "Ready", "True", "Serving")
	change("3")
	condition("second", "Degraded", "True", pluginobjects.ReasonIndexOverBudget)
	condition("first", "Degraded", "False", "Healthy")
	_, msg := pluginCondition(t, ns, "second", "Degraded")
	if !strings.Contains(msg, "every item") || !strings.Contains(msg, "memoryLimit") {
		t.Errorf("the Degraded message does not say what the refusal means and what makes room: %s", msg)
	}
	evs, err := alice.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + pluginobjects.ReasonIndexOverBudget + ",involvedObject.name=second"})
	must(t, err)
	if len(evs.Items) != 1 {
		t.Errorf("%d IndexOverBudget Events on the second Plugin, as the tenant reads them; want 1", len(evs.Items))
	}

	// The first gives its memory back: the second's next list is kept.
	must(t, alice.dyn.Resource(pluginobjects.GVR).Namespace(ns).Delete(ctx, "first", metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "the second Healthy once the first is deleted", func() error {
		change(fmt.Sprint(time.Now().UnixNano()))
		if s, m := pluginCondition(t, ns, "second", "Degraded"); s != "False" {
			return fmt.Errorf("Degraded=%s: %s", s, m)
		}
		return nil
	})
}

// Two Plugins that each fit their namespace's memory budget alone, started together (as a host
// starts, or restarts, with them), both load: the instances' share a Plugin holds while it
// waits to load is not counted against another's module compiling. Counted, each kept the other
// from compiling, and both stayed OverBudget until one was paused.
func TestTwoPluginsStartedTogetherThatFitOneAtATimeBothLoad(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	serviceAccount(t, ns, "lister", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}})
	dir := t.TempDir()
	module := filepath.Join(dir, "failing.wasm") // it asks to list and watch ConfigMaps, no more
	wasmBytes := mustRead(t, wasmFile(t, "plugins", "failing"))
	writeModule(t, module, wasmBytes)
	// The first compiles at CompilePeak times the module's size, beside its instances' share;
	// the second's is the code the host holds already (the same module and memoryLimit, which
	// no other test uses), CodeHeld times. Both fit, one after the other, not both promised
	// and one compiling.
	const instance = 36 << 20
	size := int64(len(wasmBytes))
	nsBudget := resource.NewQuantity(2*instance+(2*wasm.CodeHeld+1)*size, resource.BinarySI)
	if 2*instance+wasm.CompilePeak*size <= nsBudget.Value() {
		t.Fatalf("a budget of %s leaves room for both promises and a compile: the test would test nothing", nsBudget)
	}
	for _, name := range []string{"one", "two"} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wasmrec.dev/v1alpha1", "kind": "Plugin",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"module": module, "serviceAccountName": "lister", "memoryLimit": "36Mi", "maxConcurrentReconciles": int64(1),
				"permissions": []any{map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"list", "watch"}}}}}}
		_, err := dyn(t).Resource(pluginobjects.GVR).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		must(t, err)
	}
	// The host starts with both there: both reserve their share at once, then compile.
	objectsHost(t, plugin.ObjectPolicy{Sources: []string{dir}, NamespaceMemoryBudget: nsBudget}, &logLines{})
	for _, name := range []string{"one", "two"} {
		eventually(t, 60*time.Second, name+" Ready", func() error {
			if s, m := pluginCondition(t, ns, name, "Ready"); s != "True" {
				return fmt.Errorf("Ready=%s: %s", s, m)
			}
			return nil
		})
	}
}
