package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/pluginobjects"
)

// What a tenant tried within the bounds the docs recommend, with her own token only: each test
// here is one of her findings, and what now stops it.

// objectsHost starts a host that runs plugin objects under policy, with an OCI cache of its
// own, logging to logs.
func objectsHost(t *testing.T, policy plugin.ObjectPolicy, logs *logLines) *oci.Client {
	t.Helper()
	installPluginCRD(t)
	c, err := oci.New(oci.Options{CacheDir: t.TempDir()})
	must(t, err)
	mgr := startManagerWith(t, cfg, manager.Options{Logger: logs.logger()})
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Logger: logs.logger(), OCI: c})
	must(t, err)
	t.Cleanup(host.Close)
	res, err := pluginobjects.New(host, pluginobjects.Options{Policy: policy})
	must(t, err)
	must(t, mgr.Add(res))
	return c
}

// degraded waits for a Plugin to be Degraded and returns why.
func degraded(t *testing.T, ns, name string, within time.Duration) string {
	t.Helper()
	var msg string
	eventually(t, within, name+" Degraded", func() error {
		s, m := pluginCondition(t, ns, name, "Degraded")
		if s != "True" {
			return fmt.Errorf("Degraded=%s: %s", s, m)
		}
		msg = m
		return nil
	})
	return msg
}

// degradedWith waits for a Plugin to be Degraded saying want (Degraded is also true while its
// first load runs).
func degradedWith(t *testing.T, ns, name, want string, within time.Duration) {
	t.Helper()
	eventually(t, within, name+" Degraded saying "+want, func() error {
		if s, m := pluginCondition(t, ns, name, "Degraded"); s != "True" || !strings.Contains(m, want) {
			return fmt.Errorf("Degraded=%s: %s", s, m)
		}
		return nil
	})
}

func ready(t testing.TB, ns, name string, within time.Duration) {
	t.Helper()
	eventually(t, within, name+" Ready", func() error {
		if s, m := pluginCondition(t, ns, name, "Ready"); s != "True" {
			return fmt.Errorf("Ready=%s: %s", s, m)
		}
		return nil
	})
}

// Her sources are her directory: a reference cut at another colon, a symbolic link, a layout
// naming another team's layer, a directory that is no layout and a FIFO all fail, Degraded,
// without loading another team's module, writing or echoing a host file, or holding a worker.
// The sources check once cut oci:DIR:TAG at the first colon and the pull at the last, so
// "oci:/srv/team-a:/../team-b/layout:v1" loaded team B's module.
func TestATenantsModuleComesFromHerSourceOnly(t *testing.T) {
	ctx := context.Background()
	teamA, teamB := namespace(t), namespace(t)
	srv := t.TempDir()
	dirA, dirB := filepath.Join(srv, teamA), filepath.Join(srv, teamB)
	must(t, os.MkdirAll(dirA, 0o755))
	must(t, os.MkdirAll(dirB, 0o755))
	logs := &logLines{}
	ociClient := objectsHost(t, plugin.ObjectPolicy{Sources: []string{srv + "/{namespace}/"}}, logs)

	// Team B's module, as a file and a layout, loaded once by team B (so the host's cache has it).
	theirs := withCustomSection(module2(t, "tenant"), "team-b")
	writeModule(t, filepath.Join(dirB, "theirs.wasm"), theirs)
	_, err := ociClient.Push(ctx, theirs, nil, "oci:"+filepath.Join(dirB, "layout")+":v1")
	must(t, err)
	bob := newTenant(t, "bob-"+teamB, teamB, "reader")
	serviceAccount(t, teamB, "reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	grant := []any{map[string]any{"group": "", "resources": []any{"*"}, "verbs": []any{"get", "list", "watch"}}}
	must(t, bob.plugin("theirs", map[string]any{"module": "oci:" + filepath.Join(dirB, "layout") + ":v1", "serviceAccountName": "reader", "permissions": grant}))
	ready(t, teamB, "theirs", 60*time.Second)

	alice := newTenant(t, "alice-"+teamA, teamA, "reader")
	serviceAccount(t, teamA, "reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	spec := func(module string) map[string]any {
		return map[string]any{"module": module, "serviceAccountName": "reader", "permissions": grant}
	}
	// Her own layout, naming team B's layer, without the layer: the cache must not answer.
	stolen := filepath.Join(dirA, "stolen")
	_, err = ociClient.Push(ctx, theirs, nil, "oci:"+stolen+":v1")
	must(t, err)
	must(t, os.Remove(filepath.Join(stolen, "blobs", "sha256", strings.TrimPrefix(digestOf(theirs), "sha256:"))))
	// A symbolic link in her directory to team B's module file, and one to a host file.
	must(t, os.Symlink(filepath.Join(dirB, "theirs.wasm"), filepath.Join(dirA, "link.wasm")))
	hostDir := t.TempDir() // a host directory outside every source
	must(t, os.Symlink(hostDir, filepath.Join(dirA, "etc")))
	// A directory that is no layout, holding a private file.
	private := filepath.Join(dirA, "private")
	must(t, os.MkdirAll(private, 0o755))
	must(t, os.WriteFile(filepath.Join(private, "index.json"), []byte("Hunter2 is the password"), 0o600))
	// A FIFO as her module file.
	must(t, syscall.Mkfifo(filepath.Join(dirA, "fifo.wasm"), 0o644))

	attempts := map[string]string{
		"dotdot":  "oci:" + dirA + ":/../" + teamB + "/layout:v1",
		"stolen":  "oci:" + stolen + ":v1",
		"link":    filepath.Join(dirA, "link.wasm"),
		"etc":     "oci:" + filepath.Join(dirA, "etc") + ":v1",
		"private": "oci:" + private + ":v1",
		"fifo":    filepath.Join(dirA, "fifo.wasm"),
	}
	for name, module := range attempts {
		must(t, alice.plugin(name, spec(module)))
	}
	for name := range attempts {
		msg := degraded(t, teamA, name, 30*time.Second)
		t.Logf("%s: %s", name, msg)
		for _, leak := range []string{"Hunter2", "invalid character 'H'", "team-b"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the status tells of what is not hers (%q): %s", name, leak, msg)
			}
		}
		if s, _ := pluginCondition(t, teamA, name, "Ready"); s == "True" {
			t.Errorf("%s: Ready: it loaded a module that is not hers", name)
		}
	}
	if entries, _ := os.ReadDir(private); len(entries) != 1 {
		t.Errorf("the host wrote into %s: %v", private, entries)
	}
	if entries, _ := os.ReadDir(hostDir); len(entries) != 0 {
		t.Errorf("the host wrote into a host directory through her symbolic link: %v", entries)
	}

	// The FIFO held nothing: deleting its Plugin is quick, and a new Plugin of hers is Ready.
	start := time.Now()
	must(t, alice.dyn.Resource(pluginobjects.GVR).Namespace(teamA).Delete(ctx, "fifo", metav1.DeleteOptions{}))
	writeModule(t, filepath.Join(dirA, "mine.wasm"), module2(t, "tenant"))
	must(t, alice.plugin("mine", spec(filepath.Join(dirA, "mine.wasm"))))
	ready(t, teamA, "mine", 30*time.Second)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("a new Plugin took %s to be Ready after the FIFO's was deleted", took)
	}
}

// largeModule is wasm with a custom section that makes it size bytes.
func largeModule(t testing.TB, size int) []byte {
	t.Helper()
	b := append([]byte(nil), module2(t, "tenant")...)
	pad := size - len(b) - 16
	name := "padding"
	payload := make([]byte, 0, pad)
	payload = append(payload, byte(len(name)))
	payload = append(payload, name...)
	payload = append(payload, make([]byte, pad-len(payload))...)
	b = append(b, 0x00)
	for n := uint32(len(payload)); ; { // LEB128
		c := byte(n & 0x7f)
		n >>= 7
		if n != 0 {
			b = append(b, c|0x80)
			continue
		}
		b = append(b, c)
		break
	}
	return append(b, payload...)
}

// A module is refused past the operator's size bound, before it is read whole, from a file and
// from a layout alike; an object may lower the bound, not raise it. A 1 GiB layer once took
// the host to 7.29 GiB.
func TestATenantsModuleSizeIsBounded(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dir := t.TempDir()
	limit := resource.MustParse("1Mi")
	logs := &logLines{}
	ociClient := objectsHost(t, plugin.ObjectPolicy{Sources: []string{dir}, MaxModuleSize: &limit}, logs)
	big := largeModule(t, 8<<20)
	writeModule(t, filepath.Join(dir, "big.wasm"), big)
	_, err := ociClient.Push(ctx, big, nil, "oci:"+filepath.Join(dir, "layout")+":v1")
	must(t, err)
	writeModule(t, filepath.Join(dir, "small.wasm"), largeModule(t, 512<<10))

	alice := newTenant(t, "alice-"+ns, ns, "reader")
	serviceAccount(t, ns, "reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	spec := func(module string, extra ...any) map[string]any {
		s := map[string]any{"module": module, "serviceAccountName": "reader", "permissions": []any{map[string]any{"group": "", "resources": []any{"*"}, "verbs": []any{"get", "list", "watch"}}}}
		for i := 0; i < len(extra); i += 2 {
			s[extra[i].(string)] = extra[i+1]
		}
		return s
	}
	must(t, alice.plugin("file", spec(filepath.Join(dir, "big.wasm"))))
	must(t, alice.plugin("layer", spec("oci:"+filepath.Join(dir, "layout")+":v1")))
	must(t, alice.plugin("raise", spec(filepath.Join(dir, "small.wasm"), "maxModuleSize", "1Gi")))
	must(t, alice.plugin("lower", spec(filepath.Join(dir, "small.wasm"), "maxModuleSize", "256Ki")))
	must(t, alice.plugin("small", spec(filepath.Join(dir, "small.wasm"))))
	for name, want := range map[string]string{
		"file":  "bytes), over the limit of 1.0 MiB (1048576 bytes",
		"layer": "over the limit of 1.0 MiB (1048576 bytes",
		"raise": "spec.maxModuleSize 1Gi is above the operator's limit of 1Mi (pluginObjects.maxModuleSize",
		"lower": "bytes), over the limit of 0.2 MiB (262144 bytes",
	} {
		degradedWith(t, ns, name, want, 30*time.Second)
	}
	ready(t, ns, "small", 30*time.Second)
}

// Her modules count in her memory budget with what compiling them costs, beside her instances:
// a module that does not fit is not compiled, and its Plugin is Degraded (OverBudget) naming the
// budget and what holds it; a module the host holds compiled already costs only its code; a new
// version that does not fit leaves the one serving to serve, and is moved to as soon as memory
// is given back. A valid 512 MiB module with memoryLimit 2Mi once held 1.76 GiB of a host whose
// budgets counted 4 MiB for it.
func TestATenantsModulesCountInHerMemoryBudget(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dir := t.TempDir()
	budget, limit := resource.MustParse("120Mi"), resource.MustParse("8Mi")
	logs := &logLines{}
	objectsHost(t, plugin.ObjectPolicy{Sources: []string{dir}, NamespaceMemoryBudget: &budget, MaxModuleSize: &limit}, logs)
	writeModule(t, filepath.Join(dir, "big.wasm"), largeModule(t, 6<<20)) // compiling: 108Mi at most; compiled: 48Mi
	other := largeModule(t, 6<<20+4096)                                   // other bytes: 109Mi; 49Mi
	writeModule(t, filepath.Join(dir, "other.wasm"), other)
	writeModule(t, filepath.Join(dir, "small.wasm"), largeModule(t, 1<<20)) // 18Mi; 8Mi
	alice := newTenant(t, "alice-"+ns, ns, "reader")
	serviceAccount(t, ns, "reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	spec := func(module string) map[string]any {
		return map[string]any{"module": filepath.Join(dir, module), "memoryLimit": "1Mi", "serviceAccountName": "reader",
			"permissions": []any{map[string]any{"group": "", "resources": []any{"*"}, "verbs": []any{"get", "list", "watch"}}}}
	}
	plugins := alice.dyn.Resource(pluginobjects.GVR).Namespace(ns)
	must(t, alice.plugin("small", spec("small.wasm")))
	ready(t, ns, "small", 30*time.Second)
	must(t, alice.plugin("big", spec("big.wasm"))) // 9Mi held, 1Mi and 108Mi asked: it fits
	ready(t, ns, "big", 30*time.Second)
	must(t, alice.plugin("twin", spec("big.wasm"))) // 58Mi held; big's code is shared: 1Mi and 48Mi
	ready(t, ns, "twin", 30*time.Second)

	must(t, alice.plugin("third", spec("other.wasm"))) // 107Mi held, 1Mi and 109Mi asked
	degradedWith(t, ns, "third", "its module needs 109Mi more to compile", 30*time.Second)
	// What holds her budget, each Plugin, the one waiting included.
	if _, m := pluginCondition(t, ns, "third", "Degraded"); !strings.Contains(m, "the Plugins of "+ns+" hold 108Mi of the operator's budget of 120Mi for one namespace (pluginObjects.namespaceMemoryBudget in the host config; big 49Mi, twin 49Mi, small 9Mi, third 1Mi (not loaded yet") {
		t.Errorf("third: %s", m)
	}
	if s, why := pluginCondition(t, ns, "third", "Ready"); s != "False" {
		t.Errorf("third is Ready=%s (%s), though its module was not compiled", s, why)
	}
	must(t, plugins.Delete(ctx, "third", metav1.DeleteOptions{}))
	must(t, plugins.Delete(ctx, "twin", metav1.DeleteOptions{}))

	// A new version that does not fit: the one serving serves on.
	eventually(t, 30*time.Second, "twin and third gone", func() error {
		for _, name := range []string{"third", "twin"} {
			if _, err := plugins.Get(ctx, name, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("%s still there", name)
			}
		}
		return nil
	})
	_, err := plugins.Patch(ctx, "small", types.MergePatchType, []byte(`{"spec":{"module":"`+filepath.Join(dir, "other.wasm")+`"}}`), metav1.PatchOptions{})
	must(t, err)
	degradedWith(t, ns, "small", "its module needs 109Mi more to compile", 30*time.Second)
	if s, why := pluginCondition(t, ns, "small", "Ready"); s != "True" {
		t.Errorf("small is Ready=%s (%s) while its new version waits for room", s, why)
	}
	if _, m := pluginCondition(t, ns, "small", "Degraded"); !strings.Contains(m, "the module serving serves on; spec.module is tried again in") {
		t.Errorf("small's status does not say its module serves on: %s", m)
	}
	// Room is made: the move is tried again at once, not at its next backoff, and made.
	time.Sleep(16 * time.Second) // its backoff (1 s doubling) grows past what the wait below allows
	must(t, plugins.Delete(ctx, "big", metav1.DeleteOptions{}))
	want := digestOf(other)
	eventually(t, 10*time.Second, "small serving other.wasm", func() error {
		u, err := plugins.Get(ctx, "small", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d, _, _ := unstructured.NestedString(u.Object, "status", "activeDigest")
		if s, m := pluginCondition(t, ns, "small", "Degraded"); d != want || s != "False" {
			return fmt.Errorf("activeDigest %s, Degraded=%s: %s", d, s, m)
		}
		return nil
	})

	// A new module its file brings that does not fit: Degraded SwapWaiting while the one serving
	// serves on, and swapped in once room is made, with no other change to the file (it waited
	// for the next change).
	writeModule(t, filepath.Join(dir, "grow.wasm"), largeModule(t, 1<<20+4096)) // 18Mi; 8Mi
	must(t, alice.plugin("grow", spec("grow.wasm")))                            // 59Mi held with small's 50Mi
	ready(t, ns, "grow", 30*time.Second)
	grown := largeModule(t, 6<<20+8192) // 108Mi more to compile: 167Mi
	writeModule(t, filepath.Join(dir, "grow.wasm"), grown)
	degradedWith(t, ns, "grow", "tried again at each poll of its tag, or every 10 s for a file", 30*time.Second)
	u, err := plugins.Get(ctx, "grow", metav1.GetOptions{})
	must(t, err)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if c := c.(map[string]any); c["type"] == "Degraded" && c["reason"] != "SwapWaiting" {
			t.Errorf("grow is Degraded for %v while its new module waits for room, want SwapWaiting", c["reason"])
		}
	}
	must(t, plugins.Delete(ctx, "small", metav1.DeleteOptions{})) // 9Mi held: 117Mi fits
	eventually(t, 30*time.Second, "grow serving its new module", func() error {
		u, err := plugins.Get(ctx, "grow", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d, _, _ := unstructured.NestedString(u.Object, "status", "activeDigest")
		if s, m := pluginCondition(t, ns, "grow", "Degraded"); d != digestOf(grown) || s != "False" {
			return fmt.Errorf("activeDigest %s, Degraded=%s: %s", d, s, m)
		}
		return nil
	})
}

// Events and errors are bounded: an Event her plugin's ServiceAccount may not create is refused
// to the guest and never handed to the recorder (client-go's broadcaster logged each refused
// one whole: 2000 of 512 KiB took the host to 4 GiB), a message over 1 KiB is refused, and a
// plugin failing with 64 KiB errors logs them clipped, within its logLimit. maxDelay may only
// be raised.
func TestATenantsEventsAndErrorsAreBounded(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dir := t.TempDir()
	logs := &logLines{}
	objectsHost(t, plugin.ObjectPolicy{Sources: []string{dir}}, logs)
	writeModule(t, filepath.Join(dir, "flood.wasm"), module2(t, "flood"))
	cs := kubernetes.NewForConfigOrDie(cfg)
	// She may create Events herself (so that she may grant it); her plugin's ServiceAccount may
	// not.
	alice := newTenant(t, "alice-"+ns, ns, "quiet")
	_, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "alice-events"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-events"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: alice.name}}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "alice-events"}}, metav1.CreateOptions{})
	must(t, err)
	serviceAccount(t, ns, "quiet", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	grant := []any{
		map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch"}},
		map[string]any{"group": "", "resources": []any{"events"}, "verbs": []any{"create"}},
	}
	eventually(t, 30*time.Second, "the policy admitting her Plugin", func() error {
		return alice.plugin("flood", map[string]any{"module": filepath.Join(dir, "flood.wasm"), "serviceAccountName": "quiet", "permissions": grant,
			"logLimit": map[string]any{"linesPerSecond": 1}})
	})
	must(t, alice.plugin("fast", map[string]any{"module": filepath.Join(dir, "flood.wasm"), "serviceAccountName": "quiet", "permissions": grant,
		"rateLimiter": map[string]any{"maxDelay": "1ns"}}))
	degradedWith(t, ns, "fast", "spec.rateLimiter.maxDelay 1ns is below the host's default", 30*time.Second)
	ready(t, ns, "flood", 30*time.Second)

	for _, name := range []string{"event.100", "event.4096", "fail.65536"} {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"wasmrec.dev/flood": ""}}}, metav1.CreateOptions{})
		must(t, err)
	}
	if line := logs.waitFor(t, 30*time.Second, "event.100 returned status"); !strings.Contains(line, "status 4") || !strings.Contains(line, "does not let system:serviceaccount:"+ns+":quiet create core/events") {
		t.Errorf("an Event its ServiceAccount may not create: %s", line)
	}
	if line := logs.waitFor(t, 30*time.Second, "event.4096 returned status"); !strings.Contains(line, "status 9") || !strings.Contains(line, "over the limit of 1024") {
		t.Errorf("an Event of 4 KiB: %s", line)
	}
	// 10 s of failures: the retries run at the host's pace, each line clipped, at most 1 a
	// second and its burst of 2.
	since := time.Now()
	time.Sleep(10 * time.Second)
	lines, times := logs.matching("reconciler error", ns+".flood")
	var logged, bytes int
	for i, l := range lines {
		if times[i].Before(since) {
			continue
		}
		logged++
		bytes += len(l)
		if len(l) > 4<<10 {
			t.Errorf("an error line of %d bytes", len(l))
		}
	}
	t.Logf("10 s of 64 KiB errors under logLimit 1 line/s: %d lines, %d bytes logged", logged, bytes)
	if logged > 13 {
		t.Errorf("%d error lines in 10 s under a logLimit of 1 line/s (burst 2)", logged)
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Flood"})
	must(t, err)
	if len(evs.Items) > 0 {
		t.Errorf("%d Flood events were recorded", len(evs.Items))
	}
}

// The metrics name every plugin and its module: a host run with its defaults serves them over
// HTTPS only, to a token the API server accepts, whose user may get /metrics.
func TestMetricsNeedAReviewedToken(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	h := startHost(t, "plugins: []\n", "--metrics-bind-address", "127.0.0.1:0", "--metrics-auth") // run's default, which startHost turns off for other tests
	h.waitOut(t, "serving metrics")
	url := metricsAddrRE.FindStringSubmatch(h.out.String())[1] + "/metrics"
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("metrics served at %s: want HTTPS, as tokens are sent to it", url)
	}
	// The host's own certificate, made at start: a scraper is told to skip verifying it, or
	// given one to verify (--metrics-cert-dir).
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	token := func(sa string) string {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		must(t, err)
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		must(t, err)
		return tr.Status.Token
	}
	prometheus, tenant := token("prometheus"), token("tenant")
	name := "e2e-metrics-" + ns
	_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
	get := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		must(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		who, token string
		code       int
	}{{"no token", "", 401}, {"a forged token", "forged", 401}, {"a tenant's ServiceAccount", tenant, 403}} {
		code, body := get(c.token)
		if code != c.code || strings.Contains(body, "wasmrec_") || strings.Contains(body, "go_goroutines") {
			t.Errorf("%s: %d %.200q; want %d and no metrics", c.who, code, body, c.code)
		}
	}
	eventually(t, 30*time.Second, "the scraper's ServiceAccount served", func() error {
		if code, body := get(prometheus); code != 200 || !strings.Contains(body, "go_goroutines") {
			return fmt.Errorf("%d %.200q", code, body)
		}
		return nil
	})
}

// A tenant at her bounds with shards (plugin objects of 8 shards, each a Lease with
// --share-plugins) cannot stop the host: her units past the namespace's budget wait, saying
// so, and a second replica coming and going moves the units held, cancelling their runs, which
// once returned the cancelled permission review as the runnable's error and stopped the host
// (2 of 2 runs with 512 such Plugins). Another team's plugin stays Ready throughout.
func TestATenantsShardsCannotStopTheHost(t *testing.T) {
	installPluginCRD(t)
	teamA, teamB, leaseNS := namespace(t), namespace(t), namespace(t)
	dir := t.TempDir()
	writeModule(t, filepath.Join(dir, "tenant.wasm"), module2(t, "tenant"))
	config := fmt.Sprintf("plugins: []\npluginObjects:\n  sources: [%q]\n  maxShards: 8\n", dir)
	set := &replicaSet{t: t, config: config, args: []string{"--share-plugins", "--leader-election-namespace", leaseNS,
		"--log-format", "json", "--metrics-bind-address", "127.0.0.1:0"}}
	a := set.start("a")

	grant := []any{map[string]any{"group": "", "resources": []any{"*"}, "verbs": []any{"get", "list", "watch"}}}
	spec := func(shards int) map[string]any {
		return map[string]any{"module": filepath.Join(dir, "tenant.wasm"), "serviceAccountName": "reader", "permissions": grant, "shards": int64(shards), "memoryLimit": "1Mi"}
	}
	bob := newTenant(t, "bob-"+teamB, teamB, "reader")
	serviceAccount(t, teamB, "reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	eventually(t, 30*time.Second, "bob's Plugin admitted", func() error { return bob.plugin("steady", spec(0)) })
	ready(t, teamB, "steady", 60*time.Second)

	alice := newTenant(t, "alice-"+teamA, teamA, "reader")
	serviceAccount(t, teamA, "reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	const n = 12 // 96 units against the namespace's default budget of 64
	for i := range n {
		eventually(t, 30*time.Second, "alice's Plugin admitted", func() error { return alice.plugin(fmt.Sprint("sh-", i), spec(8)) })
	}
	over := 0
	eventually(t, 2*time.Minute, "her Plugins loaded or waiting for her budget", func() error {
		loaded, waiting := 0, 0
		for i := range n {
			if s, _ := pluginCondition(t, teamA, fmt.Sprint("sh-", i), "Ready"); s == "True" {
				loaded++
			} else if s, m := pluginCondition(t, teamA, fmt.Sprint("sh-", i), "Degraded"); s == "True" && strings.Contains(m, "pluginObjects.namespaceUnitBudget") {
				waiting++
			}
		}
		over = waiting
		if loaded != 8 || waiting != n-8 {
			return fmt.Errorf("%d Ready, %d waiting for the budget", loaded, waiting)
		}
		return nil
	})
	t.Logf("%d of her Plugins wait for the namespace's unit budget", over)

	// A second replica takes its share and goes: every held unit's run is cancelled twice.
	b := set.start("b")
	eventually(t, time.Minute, "b holding a share", func() error {
		if held := b.owned(t); len(held) < 10 {
			return fmt.Errorf("b holds %d units", len(held))
		}
		return nil
	})
	b.stop(t)
	eventually(t, time.Minute, "a holding every unit again", func() error {
		if held := a.owned(t); len(held) < 65 {
			return fmt.Errorf("a holds %d units", len(held))
		}
		return nil
	})
	if !a.alive() || strings.Contains(a.h.out.String(), "a runnable failed") {
		t.Fatalf("the host stopped:\n%s", tail(a.h.out.String(), 40))
	}
	ready(t, teamB, "steady", 10*time.Second)
}

// A tenant's looping guests take her namespace's share of the host's cores
// (pluginObjects.namespaceCPU, default 1), not her neighbours': 16 looping guests once took
// 193% of a 2-core host and a neighbour lost its Lease. Here four Plugins of hers loop on every
// reconcile: at most one of them executes at a time, the others wait and fail saying why, and
// another team's plugin reconciles meanwhile.
func TestATenantsLoopsTakeHerCPUShareOnly(t *testing.T) {
	ctx := context.Background()
	teamA, teamB := namespace(t), namespace(t)
	dir := t.TempDir()
	writeModule(t, filepath.Join(dir, "misbehave.wasm"), module2(t, "misbehave"))
	logs := &logLines{}
	objectsHost(t, plugin.ObjectPolicy{Sources: []string{dir}}, logs)
	cs := kubernetes.NewForConfigOrDie(cfg)
	grant := []any{map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch"}}}
	spec := map[string]any{"module": filepath.Join(dir, "misbehave.wasm"), "serviceAccountName": "reader", "permissions": grant, "timeout": "2s"}
	alice := newTenant(t, "alice-"+teamA, teamA, "reader")
	serviceAccount(t, teamA, "reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	bob := newTenant(t, "bob-"+teamB, teamB, "reader")
	serviceAccount(t, teamB, "reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	eventually(t, 30*time.Second, "bob's Plugin admitted", func() error { return bob.plugin("steady", spec) })
	const loops = 4
	for i := range loops {
		eventually(t, 30*time.Second, "alice's Plugin admitted", func() error { return alice.plugin(fmt.Sprint("loop-", i), spec) })
	}
	ready(t, teamB, "steady", 30*time.Second)
	for i := range loops {
		ready(t, teamA, fmt.Sprint("loop-", i), 30*time.Second)
	}
	_, err := cs.CoreV1().ConfigMaps(teamA).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "loop", Labels: map[string]string{"wasmrec.dev/misbehave": ""}}}, metav1.CreateOptions{})
	must(t, err)
	time.Sleep(8 * time.Second) // about four timeouts of 2 s
	// Her neighbour's reconcile runs at once.
	_, err = cs.CoreV1().ConfigMaps(teamB).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nap-steady", Labels: map[string]string{"wasmrec.dev/misbehave": ""}}}, metav1.CreateOptions{})
	must(t, err)
	logs.waitFor(t, 10*time.Second, "napped nap-steady")

	// Her loops, each from its "looping" line to its plugin's next timeout: never two at once.
	type span struct {
		plugin     string
		begin, end time.Time
	}
	var spans []span
	for i := range loops {
		p := fmt.Sprintf("%s.loop-%d", teamA, i)
		_, began := logs.matching(`"msg"="looping"`, `"plugin"="`+p+`"`)
		_, ended := logs.matching("reconciler error", `"plugin"="`+p+`"`, "timed out")
		for _, b := range began {
			for _, e := range ended {
				if e.After(b) {
					spans = append(spans, span{p, b, e})
					break
				}
			}
		}
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.begin.Before(b.end.Add(-10*time.Millisecond)) && b.begin.Before(a.end.Add(-10*time.Millisecond)) {
				t.Errorf("%s looped from %s to %s, and %s from %s to %s: at once", a.plugin, a.begin.Format("15:04:05.000"), a.end.Format("15:04:05.000"),
					b.plugin, b.begin.Format("15:04:05.000"), b.end.Format("15:04:05.000"))
			}
		}
	}
	within := spans
	throttled, _ := logs.matching("reconciler error", teamA+".loop-", "no CPU slot free")
	t.Logf("%d of her loops ran, one at a time; %d reconciles waited for her share and failed", len(within), len(throttled))
	if len(within) < 2 || len(throttled) == 0 {
		t.Errorf("%d loops and %d throttled reconciles: want her plugins to take turns", len(within), len(throttled))
	}
}
