package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/plugin"
)

// The grant bounds what a plugin watches: a module that watches Secrets without asking for
// list and watch on them, or asking without being granted them, is refused at load and at
// swap, with the missing rules named, and no Secret informer is ever started for it.
func TestGrantBoundsWatches(t *testing.T) {
	installThings(t)
	ns := namespace(t)
	things := grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch")
	secretKey := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("Secret")}
	noSecretInformer := func(mgrCache *cache.Cache, when string) {
		t.Helper()
		if len(mgrCache.ActiveKeys(secretKey.GroupVersionKind)) > 0 {
			t.Fatalf("%s: a Secret informer runs", when)
		}
	}
	for _, c := range []struct {
		module string
		grant  []abi.Permission
		want   []string
	}{
		{"swap-v4", []abi.Permission{things, grant("", []string{"secrets"}, "list", "watch")},
			[]string{"watching Secret.v1 needs list core/secrets, watch core/secrets", "manifest does not ask for list core/secrets, watch core/secrets"}},
		{"swap-v5", []abi.Permission{things},
			[]string{"asks for permissions it was not granted: list core/secrets, watch core/secrets"}},
	} {
		t.Run(c.module, func(t *testing.T) {
			// At load.
			path := filepath.Join(t.TempDir(), "swap.wasm")
			writeModule(t, path, module2(t, c.module))
			logs := &logLines{}
			mgr, plugins := pluginHost(t, cfg, logs.logger(), plugin.Config{Name: "v1", Module: wasmFile(t, "testguests", "swap-v1"), Namespaces: []string{ns}, Permissions: c.grant})
			host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Logger: logs.logger()})
			must(t, err)
			t.Cleanup(host.Close)
			_, err = host.FetchAndLoad(context.Background(), plugin.Config{Name: "bad", Module: path, Namespaces: []string{ns}, Permissions: c.grant})
			if err == nil {
				t.Fatalf("%s loaded", c.module)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the load's refusal does not say %q:\n%v", want, err)
				}
			}
			noSecretInformer(mgr.GetCache(), "after a refused load")

			// At swap, from a module that runs.
			err = plugins["v1"].Swap(context.Background(), module2(t, c.module))
			if err == nil {
				t.Fatalf("the swap to %s was accepted", c.module)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the swap's refusal does not say %q:\n%v", want, err)
				}
			}
			if got, want := plugins["v1"].Module().Digest(), digestOf(module2(t, "swap-v1")); got != want {
				t.Errorf("after the refused swap %s serves, want v1 %s", got, want)
			}
			noSecretInformer(mgr.GetCache(), "after a refused swap")
		})
	}
}

// A module refused for what it is is compiled once, however often its source is looked at: a
// tag polled five times over, and a swap asked for again, compile nothing more.
func TestRefusedModuleIsCompiledOnce(t *testing.T) {
	installThings(t)
	ns := namespace(t)
	reg := startRegistry(t)
	client, err := oci.New(oci.Options{CacheDir: t.TempDir(), Insecure: []string{reg.addr}})
	must(t, err)
	ref := reg.addr + "/plugins/refused:live"
	push := func(name string) {
		t.Helper()
		if _, err := client.Push(context.Background(), module2(t, name), []byte(`{}`), ref); err != nil {
			t.Fatal(err)
		}
	}
	push("swap-v1")
	logs := &logLines{}
	m := metrics.New()
	_, plugins := pluginHostFull(t, cfg, logs.logger(), m, client, plugin.Config{Name: "refused", Module: "oci://" + ref, Namespaces: []string{ns},
		PollInterval: &metav1.Duration{Duration: 250 * time.Millisecond},
		Permissions:  []abi.Permission{grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch")}})
	compiles := func() float64 {
		v, _ := value(t, m, "wasmrec_plugin_module_compiles_total", map[string]string{"plugin": "refused"})
		return v
	}
	if n := compiles(); n != 1 {
		t.Fatalf("%g compiles at load, want 1", n)
	}
	push("swap-v5") // asks for Secrets, which the grant lacks
	logs.waitFor(t, 30*time.Second, "module swap refused", "asks for permissions it was not granted")
	time.Sleep(5 * 250 * time.Millisecond) // five poll intervals
	err = plugins["refused"].Swap(context.Background(), module2(t, "swap-v5"))
	var before *plugin.RefusedBeforeError
	if !errors.As(err, &before) {
		t.Errorf("a swap asked for again to the refused module: %v, want a RefusedBeforeError", err)
	}
	if n := compiles(); n != 2 {
		t.Errorf("%g compiles, want 2: the load and the refused module once", n)
	}
	if v, _ := value(t, m, "wasmrec_plugin_swaps_total", map[string]string{"plugin": "refused", "outcome": "refused"}); v != 1 {
		t.Errorf("%g refusals counted, want 1", v)
	}
}

// A guest that looks up 1000 kinds no API server serves, over and over, costs the API server a
// handful of discovery requests. A neighbour plugin's latency is logged before and during; it
// is a figure, not a check: BenchmarkNoisyNeighbour measures it.
func TestUnknownKindsDoNotHammerDiscovery(t *testing.T) {
	h, addr, loudNS, quietNS := besideANeighbour(t, "lookups")
	before := neighbourLatencies(t, quietNS, "before", 20)
	requestsBefore := scrape(t, addr, "wasmrec_discovery_requests_total")
	began := time.Now()
	misbehaving(t, loudNS, "unknownkinds")
	h.waitOut(t, "looked up 1000 unknown kinds")
	during := neighbourLatencies(t, quietNS, "during", 20)
	elapsed := time.Since(began)
	rounds := strings.Count(h.out.String(), "looked up 1000 unknown kinds")
	requests := scrape(t, addr, "wasmrec_discovery_requests_total") - requestsBefore
	t.Logf("in %s: %d rounds of 1000 lookups of unknown kinds, %.0f discovery requests; neighbour latency median %s before, %s during",
		elapsed.Round(time.Millisecond), rounds, requests, medianDuration(before), medianDuration(during))
	// A plugin gets 5 lookups of kinds the host does not know at once and 1 a second after.
	if limit := 5 + elapsed.Seconds() + 2; requests > limit {
		t.Errorf("%.0f discovery requests in %s, want at most %.0f", requests, elapsed.Round(time.Millisecond), limit)
	}
}

// withCustomSection returns wasm with a custom section named name appended: another module
// (another digest) that behaves the same.
func withCustomSection(wasm []byte, name string) []byte {
	payload := append(append([]byte{byte(len(name))}, name...), "another module"...)
	out := append(append([]byte(nil), wasm...), 0x00, byte(len(payload)))
	return append(out, payload...)
}

// A guest that loops holds only its own plugin: a swap of a ClusterPlugin's module completes
// while the old module's guest still loops, another ClusterPlugin is loaded and reconciles
// meanwhile, and SIGTERM exits at the graceful timeout naming both plugins that loop (the
// config's with interruptible: false, the object's within its 5m timeout).
func TestStuckGuestHoldsOnlyItsPlugin(t *testing.T) {
	ctx := context.Background()
	installPluginCRD(t)
	stuckNS, quietNS := namespace(t), namespace(t)
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "v2.wasm")
	misbehave := module2(t, "misbehave")
	writeModule(t, v1, misbehave)
	writeModule(t, v2, withCustomSection(misbehave, "v2"))
	// A config plugin loops too, past its 2s timeout.
	configNS := namespace(t)
	h := startHost(t, fmt.Sprintf(`pluginObjects: {sources: [/]}
plugins:
  - name: stuck-config
    module: %s
    namespaces: [%s]
    interruptible: false
    timeout: 2s
    permissions:
      - {resources: [configmaps], verbs: [get, list, watch]}
`, wasmFile(t, "testguests", "misbehave"), configNS), "--graceful-shutdown-timeout", "5s")
	h.waitOut(t, `msg="starting workers" controller=plugins`)

	create := func(name, module, ns string, verbs []any, more map[string]any) {
		t.Helper()
		spec := map[string]any{"module": module, "namespaces": []any{ns},
			"permissions": []any{map[string]any{"resources": []any{"configmaps"}, "verbs": verbs}}}
		for k, v := range more {
			spec[k] = v
		}
		_, err := dyn(t).Resource(pluginGVR).Create(ctx, clusterPlugin(t, &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": name}, "spec": spec}}), metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() { _ = dyn(t).Resource(pluginGVR).Delete(ctx, name, metav1.DeleteOptions{}) })
	}
	activeDigest := func(name string) string {
		u, err := dyn(t).Resource(pluginGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		d, _, _ := unstructured.NestedString(u.Object, "status", "activeDigest")
		return d
	}

	// Interruptible (a plugin object may not be otherwise): its loop runs until its timeout.
	create("stuck", v1, stuckNS, []any{"get", "list", "watch"}, map[string]any{"timeout": "5m"})
	h.waitOut(t, `msg="starting workers" plugin=stuck`)
	misbehaving(t, stuckNS, "loop")
	h.waitOut(t, `msg=looping plugin=stuck`)
	misbehaving(t, configNS, "loop")
	h.waitOut(t, `msg=looping plugin=stuck-config`)
	h.waitOut(t, `msg="reconcile running past its timeout: the plugin is not interruptible, so it holds its worker until the guest returns" plugin=stuck-config`)

	// The swap, while the old module's guest loops on.
	swapAsked := time.Now()
	_, err := dyn(t).Resource(pluginGVR).Patch(ctx, "stuck", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"module":%q}}`, v2), metav1.PatchOptions{})
	must(t, err)
	// Another plugin, loaded and reconciling meanwhile.
	create("quiet", wasmFile(t, "testguests", "hashc"), quietNS, []any{"get", "list", "watch", "patch"}, nil)
	want := digestOf(withCustomSection(misbehave, "v2"))
	eventually(t, 30*time.Second, "the swap beside a looping guest", func() error {
		if got := activeDigest("stuck"); got != want {
			return fmt.Errorf("activeDigest %s, want %s; the host said:\n%s", got, want, tail(h.out.String(), 15))
		}
		return nil
	})
	swapped := time.Since(swapAsked)
	quiet := neighbourLatencies(t, quietNS, "quiet", 5)
	t.Logf("the swap completed %s after it was asked for; the other plugin reconciled 5 ConfigMaps, median %s after their creation",
		swapped.Round(time.Millisecond), medianDuration(quiet).Round(100*time.Microsecond))

	signalled := time.Now()
	must(t, h.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-h.exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("exit: %v, want a non-zero status after the graceful timeout:\n%s", err, tail(h.out.String(), 20))
		}
	case <-time.After(15 * time.Second): // the plugins' own timeouts must not add to the graceful one
		t.Fatalf("still running 15s after SIGTERM, with a 5s graceful timeout:\n%s", tail(h.out.String(), 20))
	}
	took := time.Since(signalled)
	out := h.out.String()
	if !strings.Contains(out, "reconciles still in flight: stuck "+stuckNS+"/loop (for ") || !strings.Contains(out, "stuck-config "+configNS+"/loop (for ") {
		t.Fatalf("the exit does not name the stuck plugin:\n%s", tail(out, 20))
	}
	if strings.Contains(out, "is not running in this manager") {
		t.Errorf("the stop logged errors about what it had stopped already:\n%s", tail(out, 20))
	}
	t.Logf("exited %s after SIGTERM (graceful timeout 5s): %s", took.Round(time.Millisecond), strings.TrimSpace(out[strings.LastIndex(out, "wasmrec: "):]))
}

// With impersonation on, a plugin acts as its own ServiceAccount: the API server refuses its
// load while its RBAC does not let it read what its grant allows, and refuses a write its grant
// allows but its RBAC does not; once its Role has the verb, the same write goes through.
func TestImpersonationBoundsPlugins(t *testing.T) {
	ctx := context.Background()
	ns, accounts := namespace(t), namespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	pc := plugin.Config{Name: "quiet", Module: wasmFile(t, "testguests", "hashc"), Namespaces: []string{ns},
		Permissions: []abi.Permission{grant("", []string{"configmaps"}, "get", "list", "watch", "patch")}}
	objs, err := plugin.RBAC(accounts, "wasmrec-system/wasmrec", []plugin.Config{pc})
	must(t, err)
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err := cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			must(t, err)
		case *rbacv1.Role:
			if o.Namespace == ns {
				role = o
			}
		case *rbacv1.RoleBinding:
			if o.Namespace == ns {
				binding = o
			}
		}
	}
	if role == nil || binding == nil {
		t.Fatalf("plugin.RBAC gave no Role and RoleBinding in %s: %v", ns, objs)
	}

	logs := &logLines{}
	mgr := startManagerWith(t, cfg, manager.Options{Logger: logs.logger()})
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Logger: logs.logger(), Impersonate: accounts})
	must(t, err)
	t.Cleanup(host.Close)
	user := plugin.ServiceAccountUser(accounts, "quiet")

	// No Role yet: the API server would not let the plugin read what its grant allows.
	_, err = host.FetchAndLoad(ctx, pc)
	for _, want := range []string{"the API server does not let " + user, "get core/configmaps in " + ns, "list core/configmaps in " + ns, "watch core/configmaps in " + ns, "wasmrec rbac"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("load without RBAC: err = %v, want it to say %q", err, want)
		}
	}

	// A Role with the reads only: the plugin loads, and its patch (granted) is refused by the
	// API server, which names the plugin's ServiceAccount.
	readOnly := role.DeepCopy()
	readOnly.Rules[0].Verbs = []string{"get", "list", "watch"}
	_, err = cs.RbacV1().Roles(ns).Create(ctx, readOnly, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
	must(t, err)
	var p *plugin.Plugin
	eventually(t, 10*time.Second, "loading once the Role reads", func() error { // RBAC takes effect within moments
		p, err = host.FetchAndLoad(ctx, pc)
		return err
	})
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	_, err = host.Run(p)
	must(t, err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	must(t, err)
	refusal := logs.waitFor(t, 30*time.Second, "host call refused", `"call"="patch"`, `"status"="forbidden"`)
	if !strings.Contains(refusal, `User \"`+user+`\" cannot patch resource \"configmaps\"`) {
		t.Fatalf("the patch was refused, but not by the API server for the plugin's ServiceAccount:\n%s", refusal)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	must(t, err)
	if h, ok := cm.Annotations["bench/hash"]; ok {
		t.Fatalf("the ConfigMap was patched (bench/hash=%s) by a plugin whose RBAC does not allow it", h)
	}

	// The Role gets patch: the retried reconcile's patch goes through, as the plugin.
	_, err = cs.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "the patch once the Role allows it", func() error {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Annotations["bench/hash"] == "" {
			return errors.New("no bench/hash annotation yet")
		}
		for _, f := range cm.ManagedFields {
			if f.Manager == "quiet" && f.Operation == metav1.ManagedFieldsOperationUpdate {
				return nil
			}
		}
		return fmt.Errorf("patched, but not by field manager quiet: %v", cm.ManagedFields)
	})
	t.Logf("refused by the API server: %s", refusal[strings.Index(refusal, `"error"=`):])
}
