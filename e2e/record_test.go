package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/chromedp/chromedp"
	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/recording"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// A host records its plugins' reconciles as their settings say, and `wasmrec replay` runs them
// again offline, bit for bit: the crud guest's every host call (reads, a create, updates, a
// status update, a delete, an event, a line on stdout), and the record guest's failing fifth
// reconcile, which depends on the four before it on its instance (a count in its heap), on the
// clocks and on random numbers. Replayed on another build, the record guest's recordings show
// where its write differs. The host serves them, over HTTPS, to those who may read what each
// plugin reads: a tenant of the crud plugin's namespace fetches and replays its recordings with
// her token, and is refused the record plugin's, in another team's namespace.
func TestRecordAndReplay(t *testing.T) {
	ns, nsB := namespace(t), namespace(t)
	recs := t.TempDir()
	h := startHost(t, fmt.Sprintf(`plugins:
  - name: crud
    module: %[1]s
    namespaces: [%[3]s]
    record: {mode: all}
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch, create, update, delete]}
      - {group: demo.wasmrec.dev, resources: [apps], verbs: [get, list, watch]}
      - {group: demo.wasmrec.dev, resources: [apps/status], verbs: [update]}
      - {group: "", resources: [events], verbs: [create]}
  - name: record
    module: %[2]s
    namespaces: [%[4]s]
    record: {mode: failures}
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch, create, patch]}
      - {group: "", resources: [events], verbs: [create]}
`, wasmFile(t, "testguests", "crud-go"), wasmFile(t, "testguests", "record-go"), ns, nsB), "--recordings-dir", recs,
		"--metrics-bind-address", "127.0.0.1:0", "--metrics-auth")
	h.waitOut(t, `msg="starting workers" plugin=record`)
	h.waitOut(t, `msg="starting workers" plugin=crud`)

	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	createApp(t, ns, "crud-app", map[string]any{})
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "crud", Labels: map[string]string{"wasmrec.dev/crud": "yes"}}, Data: map[string]string{"app": "crud-app"}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.CoreV1().ConfigMaps(nsB).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "r", Labels: map[string]string{"wasmrec.dev/record": "yes"}}}, metav1.CreateOptions{})
	must(t, err)
	h.waitOut(t, "crud: all steps passed")

	// Five reconciles of r, one at a time: the fifth fails, and is recorded.
	for i := 1; i <= 5; i++ {
		if i > 1 {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"round":"%d"}}}`, i)
			_, err := cs.CoreV1().ConfigMaps(nsB).Patch(ctx, "r", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			must(t, err)
		}
		eventually(t, 30*time.Second, fmt.Sprintf("reconcile %d of r", i), func() error {
			out, err := cs.CoreV1().ConfigMaps(nsB).Get(ctx, "r-out", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n, _ := strconv.Atoi(out.Data["count"]); n < i {
				return fmt.Errorf("count %s", out.Data["count"])
			}
			return nil
		})
	}
	h.waitOut(t, "every fifth reconcile of r fails")

	var crudRecs, recordRecs []recording.Listed
	eventually(t, 20*time.Second, "the recordings on disk", func() error {
		crudRecs, _ = recording.List(filepath.Join(recs, "crud"))
		recordRecs, _ = recording.List(filepath.Join(recs, "record"))
		if len(crudRecs) == 0 || len(recordRecs) == 0 {
			return fmt.Errorf("%d of crud, %d of record", len(crudRecs), len(recordRecs))
		}
		return nil
	})

	// Offline: no kubeconfig, no cluster.
	replay := func(args ...string) (string, error) {
		cmd := exec.Command("../bin/wasmrec", append([]string{"replay"}, args...)...)
		cmd.Env = append(cmd.Environ(), "KUBECONFIG=/nonexistent")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := replay(filepath.Join(recs, "crud"))
	if err != nil {
		t.Fatalf("replaying crud's recordings: %v\n%s", err, out)
	}
	if !strings.Contains(out, ns+"/crud  the same: success") {
		t.Fatalf("crud's replay:\n%s", out)
	}
	out, err = replay(filepath.Join(recs, "crud"), "--show")
	for _, call := range []string{"a call to get", "a call to create", "a call to update", "a call to update_status", "a call to delete", "a call to event", "written to stdout"} {
		if err != nil || !strings.Contains(out, call) {
			t.Fatalf("crud's recording shows no %s (%v):\n%s", call, err, out)
		}
	}

	out, err = replay(filepath.Join(recs, "record"))
	if err != nil {
		t.Fatalf("replaying record's recordings: %v\n%s", err, out)
	}
	if !strings.Contains(out, nsB+`/r  the same: an error "every fifth reconcile of r fails (this was number 5)"`) {
		t.Fatalf("record's replay does not show its failing fifth reconcile, the same:\n%s", out)
	}

	// crud's recording as a wasmrec test case, in a plugin folder of its own: it passes.
	folder := t.TempDir()
	testCmd := func(args ...string) (string, error) {
		cmd := exec.Command("../bin/wasmrec", append([]string{"test", "--module", wasmFile(t, "testguests", "crud-go"), "--compilation-cache", "-"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err = testCmd("--from-recording", filepath.Join(recs, "crud"), "--digest", crudRecs[0].Digest, folder)
	if err != nil || !strings.Contains(out, "wrote ") || !strings.Contains(out, "1 case passed") {
		t.Fatalf("crud's recording as a test case: %v\n%s", err, out)
	}
	written, _ := filepath.Glob(filepath.Join(folder, "tests", "recorded-*.yaml"))
	if len(written) != 1 {
		t.Fatalf("the case files written: %v", written)
	}
	b, _ := os.ReadFile(written[0])
	if !strings.Contains(string(b), "reason: CrudDone") || !strings.Contains(string(b), "crud-app") {
		t.Fatalf("the case holds no CrudDone event or App read:\n%s", b)
	}
	t.Logf("the case made of crud's recording:\n%s\n%s", out, b)

	out, err = replay(filepath.Join(recs, "record"), "--module", wasmFile(t, "testguests", "record-v2-go"))
	if err == nil || !strings.Contains(out, "DIFFERS on") || !strings.Contains(out, "patch v1 ConfigMap "+nsB+`/r-out: data.version: added "2"`) {
		t.Fatalf("replaying on version 2: %v; want its apply's new field:\n%s", err, out)
	}
	t.Logf("version 2:\n%s", out)
	// The same, as a page, in a browser: a section per recording, version 2's write beside the
	// recorded one and marked.
	page := filepath.Join(t.TempDir(), "v2.html")
	out, _ = replay(filepath.Join(recs, "record"), "--module", wasmFile(t, "testguests", "record-v2-go"), "--page", page)
	if !strings.Contains(out, "wrote "+page) {
		t.Fatalf("no page written:\n%s", out)
	}
	browser := testenv.Browser(t)
	if err := chromedp.Do(browser, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("section.recording"))); err != nil {
		t.Fatal(err)
	}
	if n := testenv.Eval[int](t, browser, `document.querySelectorAll("section.recording").length`); n != len(recordRecs) {
		t.Errorf("the page shows %d recordings, want %d", n, len(recordRecs))
	}
	made := testenv.Eval[string](t, browser, `[...document.querySelectorAll(".pair.differs .made")].map(e => e.textContent).join("\n")`)
	if !strings.Contains(made, `"version": "2"`) {
		t.Errorf("version 2's writes on the page do not hold its new field:\n%s", made)
	}
	// The same build, run so, does what it did.
	out, err = replay(filepath.Join(recs, "record"), "--module", wasmFile(t, "testguests", "record-go"))
	if err != nil || !strings.Contains(out, "the same on") {
		t.Fatalf("rerunning on the recorded build: %v\n%s", err, out)
	}

	// A tenant of the crud plugin's namespace, who may read what it reads, with her token.
	alice := tenantToken(t, ns, "alice", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"demo.wasmrec.dev"}, Resources: []string{"apps"}, Verbs: []string{"get", "list"}},
	})
	h.waitOut(t, "serving metrics")
	host := metricsAddrRE.FindStringSubmatch(h.out.String())[1]
	kubeconfig := filepath.Join(t.TempDir(), "alice.kubeconfig")
	must(t, os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: alice, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: alice}}]
current-context: c
`, cfg.Host, alice)), 0o600))
	home := t.TempDir() // the fetched recordings go to its cache directory
	fetch := func(plugin string) (string, error) {
		cmd := exec.Command("../bin/wasmrec", "replay", "--from", host, "--kubeconfig", kubeconfig, plugin)
		cmd.Env = append(cmd.Environ(), "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err = fetch("crud")
	if err != nil || !strings.Contains(out, ns+"/crud  the same: success") {
		t.Fatalf("alice replaying crud's recordings from the host: %v\n%s", err, out)
	}
	out, err = fetch("record")
	if err == nil || !strings.Contains(out, "403 Forbidden") || !strings.Contains(out, `may not read the recordings of a plugin "record"`) || strings.Contains(out, "the same") || strings.Contains(out, nsB) {
		t.Fatalf("alice fetching another team's recordings: %v; want 403 naming what she may not read:\n%s", err, out)
	}
	// A plugin the host does not run is refused in the same words: nothing says which exist.
	out, err = fetch("nosuch")
	if err == nil || !strings.Contains(out, `may not read the recordings of a plugin "nosuch": one needs to be allowed`) {
		t.Fatalf("alice fetching a plugin that does not exist: %v\n%s", err, out)
	}
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).Get(host + "/recordings/crud/")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %s, want 401", resp.Status)
	}
}

// tenantToken makes a ServiceAccount in ns with a Role of these rules, and returns a token of it.
func tenantToken(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}, metav1.CreateOptions{})
	must(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}

// A rollout with a replay step runs the new version on the live one's latest recordings
// before anything else: version 2 of the record guest writes a field more on every one, and is
// rolled back at once, with no tolerance of differing writes, before its shadow step; the live
// version serves on.
func TestRolloutReplayStepRollsBack(t *testing.T) {
	ns := namespace(t)
	module := filepath.Join(t.TempDir(), "record.wasm")
	writeModule(t, module, module2(t, "record-go"))
	h := startHost(t, fmt.Sprintf(`plugins:
  - name: rec
    module: %s
    namespaces: [%s]
    record: {mode: all}
    rollout:
      replay: {recordings: 5}
      shadow: {duration: 1m}
      analysis: {tolerance: {differingWrites: 0}}
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch, create, patch]}
      - {group: "", resources: [events], verbs: [create]}
`, module, ns), "--recordings-dir", t.TempDir())
	h.waitOut(t, `msg="starting workers" plugin=rec`)
	cs := kubernetes.NewForConfigOrDie(cfg)
	for i := range 3 {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprint("r", i), Labels: map[string]string{"wasmrec.dev/record": "yes"}}}, metav1.CreateOptions{})
		must(t, err)
	}
	eventually(t, 30*time.Second, "the three reconciled", func() error {
		for i := range 3 {
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), fmt.Sprint("r", i, "-out"), metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})

	writeModule(t, module, module2(t, "record-v2-go"))
	h.waitOut(t, "rollout: rolled back")
	_, line, _ := strings.Cut(h.out.String(), "rollout: rolled back")
	line, _, _ = strings.Cut(line, "\n")
	if !strings.Contains(line, "recordings of the live version ran with other writes, Events or results on the new one") || !strings.Contains(line, `data.version: added \"2\"`) || !strings.Contains(line, "past the tolerance of 0") || !strings.Contains(line, `step=replay`) {
		t.Fatalf("the rollback does not say what the replay step found: %s", line)
	}
	if strings.Contains(h.out.String(), `step=shadow`) {
		t.Fatal("the new version reached its shadow step")
	}
	t.Logf("rolled back%s", line)
}

// A plugin with map functions, recording every reconcile: the maps its instances ran come with
// each recording, shown as steps, and every recording replays offline the same.
func TestRecordingsHoldTheMapsBeforeAReconcile(t *testing.T) {
	ns := namespace(t)
	recs := t.TempDir()
	h := startHost(t, fmt.Sprintf(`plugins:
  - name: rollout
    module: %s
    namespaces: [%s]
    record: {mode: all}
    permissions:
      - {group: apps, resources: [deployments], verbs: [get, list, watch, patch]}
      - {group: "", resources: [configmaps, secrets], verbs: [get, list, watch]}
      - {group: "", resources: [events], verbs: [create]}
`, wasmFile(t, "plugins", "rollout"), ns), "--recordings-dir", recs)
	h.waitOut(t, `msg="starting workers" plugin=rollout`)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: demo.WebConfig}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, demo.WebDeployment(ns), metav1.CreateOptions{})
	must(t, err)
	hash := func() string {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return d.Spec.Template.Annotations["wasmrec.dev/config-hash"]
	}
	for i := 2; i <= 4; i++ {
		before := hash()
		_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, demo.WebConfig, types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":"%d"}}`, i), metav1.PatchOptions{})
		must(t, err)
		eventually(t, 30*time.Second, fmt.Sprintf("the hash after change %d", i), func() error {
			if h := hash(); h == before || h == "" {
				return fmt.Errorf("hash %q", h)
			}
			return nil
		})
	}
	var listed []recording.Listed
	eventually(t, 20*time.Second, "recordings after maps", func() error {
		listed, _ = recording.List(filepath.Join(recs, "rollout"))
		for _, l := range listed {
			_, before, err := l.Load()
			if err != nil {
				return err
			}
			for _, s := range before {
				if s.Kind == recording.StepMap {
					return nil
				}
			}
		}
		return fmt.Errorf("none of %d recordings has a map before it", len(listed))
	})
	cmd := exec.Command("../bin/wasmrec", "replay", filepath.Join(recs, "rollout"))
	cmd.Env = append(cmd.Environ(), "KUBECONFIG=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Count(string(out), "the same") != len(listed) {
		t.Fatalf("replaying %d recordings: %v\n%s", len(listed), err, out)
	}
	cmd = exec.Command("../bin/wasmrec", "replay", filepath.Join(recs, "rollout"), "--show")
	cmd.Env = append(cmd.Environ(), "KUBECONFIG=/nonexistent")
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "map watches[0] ConfigMap "+ns+"/"+demo.WebConfig) {
		t.Fatalf("the recordings shown name no map of %s: %v\n%s", demo.WebConfig, err, out)
	}
}
