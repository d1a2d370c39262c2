package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin"
)

// A plugin that reads a kind the host's own identity may not list fails alone: each of its
// reads of it returns forbidden at once, naming the missing RBAC, not at the reconcile's
// timeout; it reports what it lacks (Unavailable) and the log says so once; a plugin beside it
// keeps reconciling, and the host stays ready. Once the RBAC is granted the plugin reads again,
// without a restart.
func TestRefusedKindFailsOnlyItsPlugin(t *testing.T) {
	ns := namespace(t)
	user := fmt.Sprintf("e2e-health-host-%d", time.Now().UnixNano())
	hostCfg, err := cp.AddUser(user)
	must(t, err)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	// What a host needs (ConfigMaps for its plugins, CRDs, which it follows, its events), less
	// Secrets.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	asHost := kubernetes.NewForConfigOrDie(hostCfg)
	eventually(t, 10*time.Second, "the host's RBAC in force", func() error {
		_, err := asHost.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err
	})

	var loaded []*plugin.Plugin
	t.Cleanup(func() { // registered first, so it runs after the manager has stopped
		for _, p := range loaded {
			p.Close(context.Background())
		}
	})
	logs := &logLines{}
	mgr := startManagerWith(t, hostCfg, manager.Options{Logger: logs.logger()})
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Logger: logs.logger()})
	must(t, err)
	t.Cleanup(host.Close)
	timeout := metav1.Duration{Duration: 30 * time.Second}
	run := func(c plugin.Config) *plugin.Plugin {
		t.Helper()
		p, err := host.FetchAndLoad(ctx, c)
		must(t, err)
		loaded = append(loaded, p)
		_, err = host.Run(p)
		must(t, err)
		return p
	}
	reader := run(plugin.Config{Name: "readsecret", Module: wasmFile(t, "testguests", "readsecret"), Namespaces: []string{ns}, Timeout: &timeout,
		Permissions: []abi.Permission{grant("", []string{"configmaps", "secrets"}, "get", "list", "watch")}})
	neighbour := run(plugin.Config{Name: "misbehave", Module: wasmFile(t, "testguests", "misbehave"), Namespaces: []string{ns},
		Permissions: []abi.Permission{grant("", []string{"configmaps"}, "get", "list", "watch")}})

	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "db", Labels: map[string]string{"wasmrec.dev/readsecret": "yes"}}}, metav1.CreateOptions{})
	must(t, err)

	// Every read fails at once, saying what the host lacks; the reconcile fails and is retried.
	missing := "the host cannot list core/secrets in " + ns + ": grant its ServiceAccount list and watch on them"
	line := logs.waitFor(t, 20*time.Second, "get secret db returned status 4")
	if !strings.Contains(line, missing) || !strings.Contains(line, `User \"`+user+`\" cannot list resource \"secrets\"`) {
		t.Errorf("the plugin's read does not say what the host lacks, and who was refused:\n%s", line)
	}
	eventually(t, 20*time.Second, "the reconcile retried", func() error {
		if lines, _ := logs.matching("get secret db returned status 4"); len(lines) < 3 {
			return fmt.Errorf("%d reads", len(lines))
		}
		return nil
	})
	took := regexp.MustCompile(`status 4 after (\d+) ms`)
	lines, _ := logs.matching("get secret db returned status 4")
	for _, l := range lines {
		m := took.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("no time in %s", l)
		}
		if ms, _ := strconv.Atoi(m[1]); time.Duration(ms)*time.Millisecond > 2*time.Second {
			t.Errorf("a read took %d ms to fail, want well within the reconcile's timeout of %s", ms, timeout.Duration)
		}
	}

	// The plugin says what it lacks; its neighbour lacks nothing and keeps reconciling.
	eventually(t, 10*time.Second, "the plugin reports what it lacks", func() error {
		if got := reader.Unavailable(); len(got) != 1 || !strings.Contains(got[0], missing) || !strings.Contains(got[0], "forbidden") {
			return fmt.Errorf("Unavailable() = %q, want one line saying %q", got, missing)
		}
		return nil
	})
	if got := neighbour.Unavailable(); len(got) > 0 {
		t.Errorf("the neighbour reports %q", got)
	}
	misbehaving(t, ns, "nap-beside")
	logs.waitFor(t, 20*time.Second, "napped nap-beside")
	if said, _ := logs.matching(`"plugin"="readsecret"`, missing, "until then the plugin's reads"); len(said) != 1 {
		t.Errorf("%d ERROR lines of the plugin say what it lacks over %d reads, want 1:\n%s", len(said), len(lines), strings.Join(said, "\n"))
	}

	// The host is ready: its start does not wait for the Secret informer, and a kind only a
	// plugin needs does not make it unready, though the cache reports the refusal.
	syncCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	started := mgr.GetCache().WaitForCacheSync(syncCtx) // what `wasmrec run` waits for to be ready
	if !started {
		t.Error("the host's caches never count as synced: it would never be ready")
	}
	if why := host.NotReady(started); len(why) > 0 {
		t.Errorf("the host is not ready: %q", why)
	}
	refused := false
	for _, f := range mgr.GetCache().Failures() {
		refused = refused || (f.Refused() && f.Resource.Resource == "secrets")
	}
	if !refused {
		t.Errorf("the cache does not report the refused Secret informer: %+v", mgr.GetCache().Failures())
	}

	// Granted, the plugin reads again.
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}})
	_, err = cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
	must(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, metav1.CreateOptions{})
	must(t, err)
	logs.waitFor(t, 60*time.Second, "get secret db returned status 0")
	eventually(t, 10*time.Second, "the plugin lacks nothing", func() error {
		if got := reader.Unavailable(); len(got) > 0 {
			return fmt.Errorf("Unavailable() = %q", got)
		}
		return nil
	})
	logs.waitFor(t, 10*time.Second, `"plugin"="readsecret"`, "the host can list and watch what the plugin needs again")
}
