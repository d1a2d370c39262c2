package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

// pluginGVR is the resource of the ClusterPlugins most tests make: they are about what a plugin
// object runs, not about tenancy (tenancy_test.go is).
var pluginGVR = pluginobjects.ClusterGVR

// installPluginCRD installs the Plugin and ClusterPlugin CRDs and their admission policy for
// the test (TestMain did, unless a test removed them), and after it removes every Plugin and
// ClusterPlugin by removing the CRDs, then installs them again as TestMain left them.
func installPluginCRD(t testing.TB) {
	t.Helper()
	must(t, pluginobjects.Install(context.Background(), cfg))
	t.Cleanup(func() {
		ctx := context.Background()
		if err := crd.Uninstall(ctx, cfg, []string{"plugins.wasmrec.dev", "clusterplugins.wasmrec.dev"}, 0); err != nil {
			t.Errorf("removing the Plugin CRDs: %v", err)
		}
		if err := pluginobjects.Install(ctx, cfg); err != nil {
			t.Errorf("installing the Plugin CRDs again: %v", err)
		}
	})
}

// anySource lets plugin objects load modules from anywhere, and poll tags quickly, for the tests
// not about the operator's bounds.
var anySource = plugin.ObjectPolicy{Sources: []string{"/", "oci://"}, MinPollInterval: &metav1.Duration{Duration: 100 * time.Millisecond}}

var accountsNS = sync.OnceValue(func() string {
	cs := kubernetes.NewForConfigOrDie(cfg)
	name := fmt.Sprintf("e2e-accounts-%d", os.Getpid()%10000)
	_, _ = cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return name
})

// clusterPlugin makes obj, a ClusterPlugin's content, act as a ServiceAccount made for it whose
// RBAC is exactly the object's grant in its namespaces (what `wasmrec rbac` would print), and
// returns it.
func clusterPlugin(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	obj.SetAPIVersion(pluginobjects.ClusterGVK.GroupVersion().String())
	obj.SetKind(pluginobjects.ClusterGVK.Kind)
	raw, err := json.Marshal(obj.Object["spec"])
	must(t, err)
	var pc plugin.Config
	must(t, json.Unmarshal(raw, &pc))
	pc.Name = obj.GetName()
	rbac, err := plugin.RBAC(accountsNS(), "wasmrec-system/wasmrec", []plugin.Config{pc})
	must(t, err)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, o := range rbac {
		var err error
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	must(t, unstructured.SetNestedMap(obj.Object, map[string]any{"namespace": accountsNS(), "name": pc.Name}, "spec", "serviceAccount"))
	return obj
}

// A Plugin object runs a plugin; changing spec.module swaps it, with an Event and the new
// digest in status; a module that must not run sets Degraded with a message and the last good
// one keeps serving; deleting the object stops the plugin and releases its informers.
func TestPluginResource(t *testing.T) {
	ctx := context.Background()
	installPluginCRD(t)
	installThings(t)
	ns := namespace(t)

	layout := filepath.Join(t.TempDir(), "layout")
	client, err := oci.New(oci.Options{CacheDir: t.TempDir()})
	must(t, err)
	for _, v := range []string{"v1", "v2"} {
		_, err := client.Push(ctx, module2(t, "swap-"+v), []byte(`{}`), "oci:"+layout+":"+v)
		must(t, err)
	}

	logs := &logLines{}
	mgr := startManagerWith(t, cfg, manager.Options{Logger: logr.Discard()})
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Logger: logs.logger(), OCI: client})
	must(t, err)
	t.Cleanup(host.Close)
	res, err := pluginobjects.New(host, pluginobjects.Options{Policy: anySource})
	must(t, err)
	must(t, mgr.Add(res))

	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wasmrec.dev/v1alpha1", "kind": "Plugin",
		"metadata": map[string]any{"name": "swapper"},
		"spec": map[string]any{"module": "oci:" + layout + ":v1", "namespaces": []any{ns}, "pollInterval": "200ms",
			"permissions": []any{map[string]any{"group": "follow.wasmrec.dev", "resources": []any{"things"}, "verbs": []any{"get", "list", "watch"}}}}}}
	_, err = dyn(t).Resource(pluginGVR).Create(ctx, clusterPlugin(t, obj), metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = dyn(t).Resource(pluginGVR).Delete(ctx, "swapper", metav1.DeleteOptions{}) })

	condition := func(typ string) (string, string) { return objectCondition(t, pluginGVR, "", "swapper", typ) }
	digest := func() string {
		u, _ := dyn(t).Resource(pluginGVR).Get(ctx, "swapper", metav1.GetOptions{})
		d, _, _ := unstructured.NestedString(u.Object, "status", "activeDigest")
		return d
	}
	waitStatus := func(what string, ok func() bool) {
		t.Helper()
		eventually(t, 30*time.Second, what, func() error {
			if !ok() {
				r, rm := condition("Ready")
				d, dm := condition("Degraded")
				return fmt.Errorf("Ready=%s (%s) Degraded=%s (%s) digest=%s", r, rm, d, dm, digest())
			}
			return nil
		})
	}
	setModule := func(m string) {
		t.Helper()
		patch := fmt.Appendf(nil, `{"spec":{"module":%q}}`, m)
		_, err := dyn(t).Resource(pluginGVR).Patch(ctx, "swapper", types.MergePatchType, patch, metav1.PatchOptions{})
		must(t, err)
	}
	events := func(reason string) error {
		evs, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil || len(evs.Items) == 0 {
			return fmt.Errorf("no %s event (%v)", reason, err)
		}
		return nil
	}

	waitStatus("Ready with v1", func() bool {
		r, _ := condition("Ready")
		return r == "True" && digest() == digestOf(module2(t, "swap-v1"))
	})
	thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "follow.wasmrec.dev/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"n": int64(1)}}}
	eventually(t, 30*time.Second, "creating a thing", func() error {
		_, err := dyn(t).Resource(thingGVR).Namespace(ns).Create(ctx, thing, metav1.CreateOptions{})
		return err
	})
	logs.waitFor(t, 30*time.Second, "v1 reconciled a n=1")

	setModule("oci:" + layout + ":v2")
	waitStatus("swapped to v2", func() bool { return digest() == digestOf(module2(t, "swap-v2")) })
	logs.waitFor(t, 30*time.Second, "v2 reconciled a n=1")
	eventually(t, 10*time.Second, "a Swapped event", func() error { return events("Swapped") })

	// The tag the plugin left moves: it is no longer the plugin's source, so nothing is tried
	// (swap-v3 asks for more than the grant: an attempt would be a refusal).
	refusalsBefore := func() int64 {
		u, _ := dyn(t).Resource(pluginGVR).Get(ctx, "swapper", metav1.GetOptions{})
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "refusals")
		return n
	}()
	_, err = client.Push(ctx, module2(t, "swap-v3"), []byte(`{}`), "oci:"+layout+":v1")
	must(t, err)
	time.Sleep(time.Second) // five polls
	if d, msg := condition("Degraded"); d != "False" || digest() != digestOf(module2(t, "swap-v2")) {
		t.Fatalf("the old tag moving touched the plugin: Degraded=%s (%s), digest %s", d, msg, digest())
	}
	u0, _ := dyn(t).Resource(pluginGVR).Get(ctx, "swapper", metav1.GetOptions{})
	if n, _, _ := unstructured.NestedInt64(u0.Object, "status", "refusals"); n != refusalsBefore {
		t.Fatalf("the poller tried the tag the plugin left: refusals %d -> %d", refusalsBefore, n)
	}
	_, err = client.Push(ctx, module2(t, "swap-v1"), []byte(`{}`), "oci:"+layout+":v1") // put v1 back
	must(t, err)

	setModule(wasmFile(t, "testguests", "abi7"))
	waitStatus("Degraded by the ABI v7 module", func() bool {
		d, msg := condition("Degraded")
		r, _ := condition("Ready")
		return d == "True" && r == "True" && strings.Contains(msg, "plugin speaks ABI v7, host speaks v1")
	})
	if digest() != digestOf(module2(t, "swap-v2")) {
		t.Fatalf("the refused module replaced v2: %s", digest())
	}
	eventually(t, 10*time.Second, "a SwapRefused event", func() error { return events("SwapRefused") })

	// A corrupt blob, a module asking for more than the grant, an unreachable registry: each is
	// Degraded with a message saying what to do, and v2 keeps serving.
	_, err = client.Push(ctx, module2(t, "swap-v3"), []byte(`{}`), "oci:"+layout+":bad")
	must(t, err)
	blobs, _ := filepath.Glob(filepath.Join(layout, "blobs", "sha256", "*"))
	v3 := module2(t, "swap-v3")
	for _, b := range blobs {
		if data, _ := os.ReadFile(b); bytes.Equal(data, v3) {
			data[len(data)/2] ^= 0xff
			must(t, os.WriteFile(b, data, 0o644))
		}
	}
	for _, c := range []struct{ module, want string }{
		{"oci:" + layout + ":bad", "digest"},
		{wasmFile(t, "plugins", "app"), "asks for permissions it was not granted"},
		{"oci://127.0.0.1:1/plugins/nowhere:v1", "check the reference, the registry's address and credentials"},
	} {
		setModule(c.module)
		waitStatus("Degraded: "+c.want, func() bool {
			d, msg := condition("Degraded")
			r, _ := condition("Ready")
			return d == "True" && r == "True" && strings.Contains(msg, c.want)
		})
		if digest() != digestOf(module2(t, "swap-v2")) {
			t.Fatalf("%s replaced v2: %s", c.module, digest())
		}
	}
	u, err := dyn(t).Resource(pluginGVR).Get(ctx, "swapper", metav1.GetOptions{})
	must(t, err)
	swaps, _, _ := unstructured.NestedInt64(u.Object, "status", "swaps")
	refusals, _, _ := unstructured.NestedInt64(u.Object, "status", "refusals")
	// Refusals count modules refused (ABI v7, the app asking too much); a blob that does not
	// match its digest and a registry out of reach are fetch failures, not refusals.
	if swaps != 1 || refusals != 2 {
		t.Errorf("status counts swaps=%d refusals=%d, want 1 and 2", swaps, refusals)
	}
	// And a good module clears Degraded.
	setModule("oci:" + layout + ":v1")
	waitStatus("healthy on v1 again", func() bool {
		d, _ := condition("Degraded")
		return d == "False" && digest() == digestOf(module2(t, "swap-v1"))
	})
	eventually(t, 10*time.Second, "a RolledBack event (v1 served before)", func() error { return events("RolledBack") })

	// spec.module moves from the registry to a file: the file is watched from then on, and a
	// module written to it is swapped in.
	file := filepath.Join(t.TempDir(), "swapper.wasm")
	writeModule(t, file, module2(t, "swap-v2"))
	setModule(file)
	waitStatus("swapped to v2 from the file", func() bool { return digest() == digestOf(module2(t, "swap-v2")) })
	writeModule(t, file, module2(t, "swap-v1"))
	waitStatus("the module written to the file swapped in", func() bool { return digest() == digestOf(module2(t, "swap-v1")) })
	// A module written to the file and refused is Degraded, and stays so (the spec's move to the
	// file is over; the refusal is the trigger's) until a good one is written.
	writeModule(t, file, []byte("\x00asm\x01\x00\x00\x00not a module, written to "+file))
	degradedByFile := func() bool { d, msg := condition("Degraded"); return d == "True" && strings.Contains(msg, "swapper") }
	waitStatus("Degraded by the module written to the file", degradedByFile)
	time.Sleep(2 * time.Second)
	if !degradedByFile() {
		t.Fatal("Degraded cleared while the refused module is still the file's")
	}
	writeModule(t, file, module2(t, "swap-v2"))
	waitStatus("healthy on v2 from the file", func() bool {
		d, _ := condition("Degraded")
		return d == "False" && digest() == digestOf(module2(t, "swap-v2"))
	})

	// Another setting changes: the plugin is reloaded, and its counts carry on.
	counts := func() (generation, observed, swaps, refusals int64) {
		u, err := dyn(t).Resource(pluginGVR).Get(ctx, "swapper", metav1.GetOptions{})
		must(t, err)
		observed, _, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		swaps, _, _ = unstructured.NestedInt64(u.Object, "status", "swaps")
		refusals, _, _ = unstructured.NestedInt64(u.Object, "status", "refusals")
		return u.GetGeneration(), observed, swaps, refusals
	}
	_, _, swapsBefore, refusalsBefore := counts()
	if swapsBefore != 5 || refusalsBefore != 3 {
		t.Errorf("status counts swaps=%d refusals=%d, want 5 and 3", swapsBefore, refusalsBefore)
	}
	_, err = dyn(t).Resource(pluginGVR).Patch(ctx, "swapper", types.MergePatchType, []byte(`{"spec":{"pollInterval":"300ms"}}`), metav1.PatchOptions{})
	must(t, err)
	logs.waitFor(t, 30*time.Second, "plugin unloaded", `"plugin"="swapper"`)
	waitStatus("reloaded with the counts carried over", func() bool {
		gen, observed, swaps, refusals := counts()
		r, _ := condition("Ready")
		return r == "True" && observed == gen && swaps == swapsBefore && refusals == refusalsBefore
	})

	// The CRD of the kind it reconciles goes and comes back: status follows.
	waitStatus("Running", func() bool { r, _ := condition("Running"); return r == "True" })
	must(t, crd.Uninstall(ctx, cfg, []string{"things.follow.wasmrec.dev"}, 0))
	waitStatus("waiting for its CRD", func() bool {
		r, msg := condition("Running")
		return r == "False" && strings.Contains(msg, "Thing.v1.follow.wasmrec.dev")
	})
	thingCRDs, err := crd.Read("testdata/things.yaml")
	must(t, err)
	must(t, crd.Install(ctx, cfg, thingCRDs, 0))
	waitStatus("Running again", func() bool { r, _ := condition("Running"); return r == "True" })

	unloads, _ := logs.matching("plugin unloaded", `"plugin"="swapper"`)
	must(t, dyn(t).Resource(pluginGVR).Delete(ctx, "swapper", metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "the plugin unloaded", func() error {
		if now, _ := logs.matching("plugin unloaded", `"plugin"="swapper"`); len(now) == len(unloads) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	thingKey := cache.Key{GroupVersionKind: schema.GroupVersionKind{Group: "follow.wasmrec.dev", Version: "v1", Kind: "Thing"}}
	eventually(t, 10*time.Second, "the plugin's informers released", func() error {
		if informerOf(mgr.GetCache(), thingKey) {
			return fmt.Errorf("still active")
		}
		return nil
	})
}
