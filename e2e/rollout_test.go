package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

// The rollout of a new module version, on the overlap guest (see scaleout_test.go) and its
// variants: overlap-v2 (the same logic, other bytes), overlap-fail-tenth (fails on a tenth of
// the keys, and always writes the annotation overlap/candidate), overlap-write-other (writes
// overlap/seen as data.gen followed by "x").

// rolloutPlugin is a host config entry running module as name over ns, with rollout (YAML at
// the indentation of a plugin's fields).
func rolloutPlugin(name, module, ns, rollout string) string {
	return fmt.Sprintf(`  - name: %s
    module: %s
    namespaces: [%s]
    rollout:
%s
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch, patch]}
`, name, module, ns, rollout)
}

// configMapVersions are the ConfigMaps of ns that have data.gen, by name: their
// resourceVersions and annotations.
func configMapVersions(t *testing.T, ns string) (rvs map[string]string, annotations map[string]map[string]string) {
	t.Helper()
	list, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	must(t, err)
	rvs, annotations = map[string]string{}, map[string]map[string]string{}
	for _, cm := range list.Items {
		if cm.Data["gen"] != "" {
			rvs[cm.Name], annotations[cm.Name] = cm.ResourceVersion, cm.Annotations
		}
	}
	return rvs, annotations
}

// A new version that fails on a tenth of the keys is rolled back during its shadow run, with
// the settings a user gets (one worker, the default tolerance), and not one of its writes
// reaches etcd though it writes on every key it does not fail: every ConfigMap keeps its
// resourceVersion. The live version serves on, and the failing version is not tried again.
func TestRolloutRollsBackAVersionFailingATenthOfKeysInShadow(t *testing.T) {
	ns := namespace(t)
	makeConfigMaps(t, []string{ns}, 200)
	module := filepath.Join(t.TempDir(), "overlap.wasm")
	writeModule(t, module, module2(t, "overlap"))
	h := startHost(t, "plugins:\n"+rolloutPlugin("ro-fail", module, ns, "      shadow: {duration: 1m}"))
	h.waitOut(t, `msg="starting workers" plugin=ro-fail`)
	waitSeen(t, []string{ns}, 60*time.Second)
	before, _ := configMapVersions(t, ns)

	start := time.Now()
	writeModule(t, module, module2(t, "overlap-fail-tenth"))
	h.waitOut(t, "rollout: rolled back")
	took := time.Since(start)
	log := h.out.String()
	_, rolledBack, _ := strings.Cut(log, "rollout: rolled back")
	rolledBack, _, _ = strings.Cut(rolledBack, "\n")
	if !strings.Contains(rolledBack, "its error rate over the shadow step is") {
		t.Errorf("the rollback does not say which rate: %s", rolledBack)
	}
	time.Sleep(time.Second) // shadows still running when it rolled back end
	after, annotations := configMapVersions(t, ns)
	if len(after) != len(before) || !maps.Equal(before, after) {
		changed := 0
		for name, rv := range after {
			if before[name] != rv {
				changed++
			}
		}
		t.Errorf("%d ConfigMaps before the shadow run, %d after; %d resourceVersions changed: a shadow write reached etcd", len(before), len(after), changed)
	}
	for name, a := range annotations {
		if _, ok := a["overlap/candidate"]; ok {
			t.Fatalf("ConfigMap %s has the failing version's annotation: a shadow write was stored", name)
		}
	}
	report(t, "rollout: a version failing on a tenth of 200 keys was rolled back in its shadow run %s after it was written (1 worker, default tolerance); %d ConfigMaps, 0 resourceVersions changed",
		took.Round(time.Millisecond), len(after))

	// The live version serves on, and the failing module is not compiled again when its file is
	// written again.
	_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Patch(context.Background(), "cm-0001", types.MergePatchType, []byte(`{"data":{"gen":"2"}}`), metav1.PatchOptions{})
	must(t, err)
	waitSeen(t, []string{ns}, 30*time.Second)
	writeModule(t, module, module2(t, "overlap-fail-tenth"))
	time.Sleep(2 * time.Second)
	if n := strings.Count(h.out.String(), "rolling out a new module version"); n != 1 {
		t.Errorf("%d rollouts began; want 1: a version rolled back is not tried again until its source changes", n)
	}
}

// A new version that writes differently shows the differing writes in its Plugin object's
// status while it shadows the live one; `wasmrec rollout status` prints them and `wasmrec
// rollout abort` drops it, the live version serving on.
func TestRolloutShowsDifferingWritesAndAborts(t *testing.T) {
	installPluginCRD(t)
	ns := namespace(t)
	makeConfigMaps(t, []string{ns}, 100)
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "v2.wasm")
	writeModule(t, v1, module2(t, "overlap"))
	writeModule(t, v2, module2(t, "overlap-write-other"))
	h := startHost(t, fmt.Sprintf("plugins: []\npluginObjects: {sources: [%s]}\n", dir))
	h.waitOut(t, `msg="starting workers" controller=plugins`)
	ctx := context.Background()
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "ro-diff"},
		"spec": map[string]any{"module": v1, "namespaces": []any{ns},
			"permissions": []any{map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch", "patch"}}},
			"rollout":     map[string]any{"shadow": map[string]any{"duration": "10m"}}}}}
	plugins := dyn(t).Resource(pluginGVR)
	bad := obj.DeepCopy()
	bad.SetName("ro-bad")
	must(t, unstructured.SetNestedField(bad.Object, map[string]any{"canary": map[string]any{"steps": []any{int64(50), int64(10)}, "stepDuration": "-1m"}}, "spec", "rollout"))
	bad.SetAPIVersion(pluginGVR.GroupVersion().String())
	must(t, unstructured.SetNestedStringMap(bad.Object, map[string]string{"namespace": ns, "name": "ro-bad"}, "spec", "serviceAccount"))
	bad.SetKind("ClusterPlugin")
	if _, err := plugins.Create(ctx, bad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "shares go up") || !strings.Contains(err.Error(), "give a positive duration") {
		t.Errorf("a ClusterPlugin with steps [50, 10] and stepDuration -1m: %v; want both refused by the API server", err)
	}
	_, err := plugins.Create(ctx, clusterPlugin(t, obj), metav1.CreateOptions{})
	must(t, err)
	waitSeen(t, []string{ns}, 60*time.Second)
	before, _ := configMapVersions(t, ns)
	_, err = plugins.Patch(ctx, "ro-diff", types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"module":%q}}`, v2)), metav1.PatchOptions{})
	must(t, err)

	var ro struct {
		Stage, Candidate, Live, Message string
		Differences                     struct{ Compared, Writes, Results, Skipped int }
	}
	eventually(t, 60*time.Second, "status.rollout with differing writes", func() error {
		u, err := plugins.Get(ctx, "ro-diff", metav1.GetOptions{})
		if err != nil {
			return err
		}
		raw, _, _ := unstructured.NestedMap(u.Object, "status", "rollout")
		b, _ := json.Marshal(raw)
		must(t, json.Unmarshal(b, &ro))
		// A key whose live reconcile found every shadow instance busy is skipped, as on a
		// loaded machine; every other one is compared, and differs.
		if d := ro.Differences; ro.Stage != "Shadow" || d.Compared == 0 || d.Compared+d.Skipped < 100 || d.Writes != d.Compared {
			return fmt.Errorf("rollout %+v; want Shadow with each of the 100 keys compared and differing, or skipped", ro)
		}
		return nil
	})
	if !strings.Contains(h.out.String(), "the new version made patch v1 ConfigMap "+ns+"/") {
		t.Errorf("no sample of a differing write in the log")
	}

	// A restart in the middle of the rollout loads the version that served and starts the
	// rollout again, rather than giving every key to the new version.
	h.terminate(t)
	restarted := time.Now().Truncate(time.Second)
	h = startHost(t, fmt.Sprintf("plugins: []\npluginObjects: {sources: [%s]}\n", dir))
	h.waitOut(t, "rolling out a new module version")
	eventually(t, 30*time.Second, "the rollout started again", func() error {
		u, err := plugins.Get(ctx, "ro-diff", metav1.GetOptions{})
		if err != nil {
			return err
		}
		active, _, _ := unstructured.NestedString(u.Object, "status", "activeDigest")
		stage, _, _ := unstructured.NestedString(u.Object, "status", "rollout", "stage")
		compared, _, _ := unstructured.NestedInt64(u.Object, "status", "rollout", "differences", "compared")
		skipped, _, _ := unstructured.NestedInt64(u.Object, "status", "rollout", "differences", "skipped")
		started, _, _ := unstructured.NestedString(u.Object, "status", "rollout", "started")
		if at, err := time.Parse(time.RFC3339, started); err != nil || at.Before(restarted) {
			return fmt.Errorf("the rollout in status started at %s, before the restart", started)
		}
		if active != ro.Live || stage != "Shadow" || compared == 0 || compared+skipped < 100 {
			return fmt.Errorf("serving %s, stage %s, %d compared and %d skipped; want %s serving, in shadow again over the 100 keys", active, stage, compared, skipped, ro.Live)
		}
		return nil
	})

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, os.WriteFile(kubeconfig, cp.Kubeconfig, 0o600))
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("../bin/wasmrec", append(args, "--kubeconfig", kubeconfig)...).CombinedOutput()
		if err != nil {
			t.Fatalf("wasmrec %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	status := cli("rollout", "status", "clusterplugin/ro-diff")
	if !strings.Contains(status, "ClusterPlugin ro-diff: Shadow, shadow step") || !strings.Contains(status, "wrote differently") {
		t.Errorf("rollout status:\n%s", status)
	}
	t.Logf("wasmrec rollout status:\n%s", status)
	aborted := cli("rollout", "abort", "clusterplugin/ro-diff")
	if !strings.Contains(aborted, "Aborted at the shadow step") || !strings.Contains(aborted, "aborted by an operator") {
		t.Errorf("rollout abort:\n%s", aborted)
	}
	u, err := plugins.Get(ctx, "ro-diff", metav1.GetOptions{})
	must(t, err)
	if d, _, _ := unstructured.NestedString(u.Object, "status", "activeDigest"); d != ro.Live {
		t.Errorf("serving %s after the abort; want the live version %s", d, ro.Live)
	}
	after, annotations := configMapVersions(t, ns)
	if !maps.Equal(before, after) {
		t.Error("a resourceVersion changed while the new version shadowed the live one")
	}
	for name, a := range annotations {
		if strings.HasSuffix(a["overlap/seen"], "x") {
			t.Fatalf("ConfigMap %s has the aborted version's write", name)
		}
	}
	if out, err := exec.Command("../bin/wasmrec", "rollout", "promote", "clusterplugin/ro-diff", "--kubeconfig", kubeconfig).CombinedOutput(); err == nil || !strings.Contains(string(out), "has no rollout running") {
		t.Errorf("promote with no rollout running: %v\n%s", err, out)
	}
}

// A good new version goes through shadow, two canary steps and takes every key, under a writer,
// with the settings a user gets besides the step lengths: no change is lost, and no key is
// ever reconciled by both versions at once (shadow runs, which write nothing, aside).
func TestRolloutPromotesAGoodVersionWithoutALostOrDoubledReconcile(t *testing.T) {
	ns := namespace(t)
	cms := makeConfigMaps(t, []string{ns}, 300)
	module := filepath.Join(t.TempDir(), "overlap.wasm")
	writeModule(t, module, module2(t, "overlap"))
	config := "plugins:\n" + rolloutPlugin("ro-good", module, ns, "      shadow: {duration: 3s}\n      canary: {steps: [25, 50], stepDuration: 3s}")
	set := newReplicaSet(t, config, namespace(t))
	r := set.start("a")
	r.h.waitOut(t, `"msg":"starting workers"`)
	waitSeen(t, []string{ns}, 60*time.Second)

	w := startWriter(t, cms, 20*time.Millisecond)
	time.Sleep(time.Second)
	start := time.Now()
	writeModule(t, module, module2(t, "overlap-v2"))
	r.h.waitOut(t, "rollout: the new version serves every key")
	took := time.Since(start)
	time.Sleep(time.Second)
	w.halt()
	checked := waitSeen(t, []string{ns}, 60*time.Second)
	reconciles, overlaps := set.overlaps()
	for _, o := range overlaps {
		t.Error("overlap: " + o)
	}
	log := r.h.out.String()
	for _, step := range []string{`"step":"canary 25%"`, `"step":"canary 50%"`, "the canary 50% step passed"} {
		if !strings.Contains(log, step) {
			t.Errorf("the log does not show %s", step)
		}
	}
	shadows := strings.Count(log, `"shadow":true`) / 2 // a begin and an end line each
	report(t, "rollout: a good version went shadow (3s), canary 25%% and 50%% (3s each) and took every key in %s under a writer: %d changes written, %d ConfigMaps reconciled to their last change (0 lost), %d reconciles and %d shadow runs, %d overlaps",
		took.Round(time.Millisecond), w.count, checked, reconciles, shadows, len(overlaps))
}

// BenchmarkShadowCost measures what a shadow run costs the live version: the mean time of its
// reconciles (controller_runtime_reconcile_time_seconds) while 1000 ConfigMaps change, first
// with no rollout, then with a new version shadowing it (each reconcile run by both, the
// shadow's writes sent with dryRun=All and compared), in the same host process against the same
// API server. The overlap guest works about 5 ms per reconcile; 2 workers; this machine's 2
// cores run the host, the API server and etcd.
func BenchmarkShadowCost(b *testing.B) {
	const n = 1000
	ns := namespace(b)
	cms := makeConfigMaps(b, []string{ns}, n)
	module := filepath.Join(b.TempDir(), "overlap.wasm")
	must(b, os.WriteFile(module, module2(b, "overlap"), 0o644))
	config := "plugins:\n" + strings.Replace(rolloutPlugin("ro-bench", module, ns, "      shadow: {duration: 1h}"),
		"    rollout:", "    maxConcurrentReconciles: 2\n    rollout:", 1)
	h := startHost(b, config, "--metrics-bind-address", "127.0.0.1:0", "--log-format", "json")
	h.waitOut(b, metricsJSONPrefix)
	_, rest, _ := strings.Cut(h.out.String(), metricsJSONPrefix)
	addr, _, _ := strings.Cut(rest, `"`)
	url := addr + "/metrics"
	waitSeen(b, []string{ns}, 2*time.Minute)
	cs := benchClient(b)
	gen := 1
	// round changes every ConfigMap and returns the mean reconcile time of the plugin until
	// every change is reconciled, and how many reconciles that took.
	round := func() (mean time.Duration, reconciles float64) {
		sum0, count0 := reconcileTime(b, url, "ro-bench")
		gen++
		patch := []byte(fmt.Sprintf(`{"data":{"gen":"%d"}}`, gen))
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for j := i; j < len(cms); j += 8 {
					_, err := cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), cms[j].Name, types.MergePatchType, patch, metav1.PatchOptions{})
					must(b, err)
				}
			})
		}
		wg.Wait()
		waitSeen(b, []string{ns}, 5*time.Minute)
		sum1, count1 := reconcileTime(b, url, "ro-bench")
		return time.Duration((sum1 - sum0) / (count1 - count0) * float64(time.Second)), count1 - count0
	}
	var alone, shadowed time.Duration
	var nAlone, nShadowed float64
	for b.Loop() {
		alone, nAlone = round()
		must(b, os.WriteFile(module+".tmp", module2(b, "overlap-v2"), 0o644))
		must(b, os.Rename(module+".tmp", module))
		h.waitOut(b, "rolling out a new module version")
		time.Sleep(10 * time.Second) // the rollout's first reconcile of every key
		shadowed, nShadowed = round()
	}
	compared := 0.0
	for _, s := range samples(b, url, "wasmrec_rollout_shadow_comparisons_total") {
		if s.labels["found"] == "compared" {
			compared = s.value
		}
	}
	x := shadowed.Seconds() / alone.Seconds()
	fmt.Fprintf(os.Stderr, "\nshadow cost, %d ConfigMaps changed, 2 workers: live reconcile %s alone (%.0f reconciles), %s shadowed (%.0f reconciles; %.0f shadow runs compared in all): x %.2f\n",
		n, alone.Round(time.Microsecond), nAlone, shadowed.Round(time.Microsecond), nShadowed, compared, x)
	b.ReportMetric(x, "reconcile-x-alone")
	b.ReportMetric(alone.Seconds()*1000, "alone-ms")
	b.ReportMetric(shadowed.Seconds()*1000, "shadowed-ms")
}

// reconcileTime reads controller_runtime_reconcile_time_seconds' sum and count for controller.
func reconcileTime(b testing.TB, url, controller string) (sum, count float64) {
	for _, s := range samples(b, url, "controller_runtime_reconcile_time_seconds_sum") {
		if s.labels["controller"] == controller {
			sum = s.value
		}
	}
	for _, s := range samples(b, url, "controller_runtime_reconcile_time_seconds_count") {
		if s.labels["controller"] == controller {
			count = s.value
		}
	}
	return sum, count
}

// A tenant rolls out a new version of her Plugin with her own token, on the control plane's
// RBAC: the shadow's dry-run writes are made as the Plugin's ServiceAccount (which may patch
// ConfigMaps in her namespace) and stored nowhere, and she aborts the rollout with the
// annotation, which she may write on her own Plugin only.
func TestATenantRollsOutAndAbortsWithHerOwnToken(t *testing.T) {
	ctx := context.Background()
	installPluginCRD(t)
	teamA, teamB := namespace(t), namespace(t)
	alice := newTenant(t, "alice-"+teamA, teamA, "writer")
	cs := kubernetes.NewForConfigOrDie(cfg)
	// She may patch ConfigMaps herself, so the admission policy lets her grant it.
	_, err := cs.RbacV1().Roles(teamA).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "alice-patch"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().RoleBindings(teamA).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-patch"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: alice.name}}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "alice-patch"}}, metav1.CreateOptions{})
	must(t, err)
	serviceAccount(t, teamA, "writer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "patch"}})
	makeConfigMaps(t, []string{teamA}, 50)
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "v2.wasm")
	writeModule(t, v1, module2(t, "overlap"))
	writeModule(t, v2, module2(t, "overlap-write-other"))
	logs := &logLines{}
	mgr := startManagerWith(t, cfg, manager.Options{Logger: logs.logger()})
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Logger: logs.logger()})
	must(t, err)
	t.Cleanup(host.Close)
	res, err := pluginobjects.New(host, pluginobjects.Options{Policy: plugin.ObjectPolicy{Sources: []string{dir}}})
	must(t, err)
	must(t, mgr.Add(res))

	must(t, alice.plugin("ro", map[string]any{"module": v1, "serviceAccountName": "writer",
		"permissions": []any{map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch", "patch"}}},
		"rollout":     map[string]any{"shadow": map[string]any{"duration": "10m"}}}))
	waitSeen(t, []string{teamA}, 60*time.Second)
	before, _ := configMapVersions(t, teamA)
	mine := alice.dyn.Resource(pluginobjects.GVR).Namespace(teamA)
	_, err = mine.Patch(ctx, "ro", types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"module":%q}}`, v2)), metav1.PatchOptions{})
	must(t, err)
	var candidate string
	eventually(t, 60*time.Second, "the shadow's dry-run writes compared", func() error {
		u, err := mine.Get(ctx, "ro", metav1.GetOptions{})
		if err != nil {
			return err
		}
		stage, _, _ := unstructured.NestedString(u.Object, "status", "rollout", "stage")
		differ, _, _ := unstructured.NestedInt64(u.Object, "status", "rollout", "differences", "writes")
		refused, _, _ := unstructured.NestedInt64(u.Object, "status", "rollout", "candidateFigures", "refusedWrites")
		candidate, _, _ = unstructured.NestedString(u.Object, "status", "rollout", "candidate")
		if stage != "Shadow" || differ < 50 || refused != 0 {
			return fmt.Errorf("stage %q, %d differing writes, %d refused; want Shadow, 50 differing (the ServiceAccount's dry-run patches), none refused", stage, differ, refused)
		}
		return nil
	})
	// Not on another team's Plugin: her token may not write it.
	if _, err := alice.dyn.Resource(pluginobjects.GVR).Namespace(teamB).Patch(ctx, "ro", types.MergePatchType, []byte(`{"metadata":{"annotations":{"wasmrec.dev/rollout":"abort x"}}}`), metav1.PatchOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("alice annotating a Plugin of %s: %v; want forbidden", teamB, err)
	}
	_, err = mine.Patch(ctx, "ro", types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"wasmrec.dev/rollout":"abort %s"}}}`, candidate)), metav1.PatchOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "the rollout aborted", func() error {
		if s, m := pluginCondition(t, teamA, "ro", "Degraded"); s != "True" || !strings.Contains(m, "aborted by an operator") {
			return fmt.Errorf("Degraded=%s: %s", s, m)
		}
		return nil
	})
	after, annotations := configMapVersions(t, teamA)
	if !maps.Equal(before, after) {
		t.Error("a resourceVersion changed while the tenant's new version shadowed the live one")
	}
	for name, a := range annotations {
		if strings.HasSuffix(a["overlap/seen"], "x") {
			t.Fatalf("ConfigMap %s has the aborted version's write", name)
		}
	}
}
