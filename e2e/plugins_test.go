package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/demo"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/plugin"
	"github.com/wasmrec/wasmrec/host/wasm"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

var appGVR = schema.GroupVersionResource{Group: "demo.wasmrec.dev", Version: "v1", Resource: "apps"}

// wasmFile is the path of bin/<dir>/<name>.wasm, built by `make plugins testguests`.
func wasmFile(t testing.TB, dir, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "bin", dir, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		testenv.Missing(t, err, "plugins testguests")
	}
	return p
}

// logLines collects log lines with the time they were written.
type logLines struct {
	mu    sync.Mutex
	lines []string
	times []time.Time
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
		l.times = append(l.times, time.Now())
	}, funcr.Options{Verbosity: 1})
}

func (l *logLines) matching(substrs ...string) (lines []string, times []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for i, line := range l.lines {
		for _, s := range substrs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		lines, times = append(lines, line), append(times, l.times[i])
	}
	return lines, times
}

func (l *logLines) waitFor(t *testing.T, timeout time.Duration, substrs ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if lines, _ := l.matching(substrs...); len(lines) > 0 {
			return lines[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line with %q after %s", substrs, timeout)
	return ""
}

var (
	engineOnce sync.Once
	engine     *wasm.Engine
)

// sharedEngine compiles through the user's compilation cache, so the 16 MB rollout plugin is
// compiled once per machine, not once per test.
func sharedEngine(t *testing.T) *wasm.Engine {
	engineOnce.Do(func() {
		var err error
		if engine, err = wasm.NewEngine(wasm.EngineOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	return engine
}

// pluginHost starts a manager on restCfg with the plugins of cfgs loaded; it fails the test if
// one does not load.
func pluginHost(t *testing.T, restCfg *rest.Config, log logr.Logger, cfgs ...plugin.Config) (*manager.Manager, map[string]*plugin.Plugin) {
	t.Helper()
	return pluginHostWithMetrics(t, restCfg, log, nil, cfgs...)
}

// pluginHostWithMetrics is pluginHost reporting to m.
func pluginHostWithMetrics(t *testing.T, restCfg *rest.Config, log logr.Logger, m *metrics.Metrics, cfgs ...plugin.Config) (*manager.Manager, map[string]*plugin.Plugin) {
	t.Helper()
	return pluginHostFull(t, restCfg, log, m, nil, cfgs...)
}

// pluginHostFull is pluginHost reporting to m and pulling oci:// modules with c; those get a tag
// poller, as `wasmrec run` gives them.
func pluginHostFull(t *testing.T, restCfg *rest.Config, log logr.Logger, m *metrics.Metrics, ociClient *oci.Client, cfgs ...plugin.Config) (*manager.Manager, map[string]*plugin.Plugin) {
	t.Helper()
	var modules []*plugin.Plugin
	t.Cleanup(func() { // registered first, so it runs after the manager has stopped
		for _, p := range modules {
			p.Close(context.Background())
		}
	})
	mgr := startManagerWith(t, restCfg, manager.Options{Logger: log})
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t), Metrics: m, Logger: log, OCI: ociClient})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	loaded := map[string]*plugin.Plugin{}
	for _, c := range cfgs {
		p, err := host.FetchAndLoad(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		_, err = host.Run(p)
		must(t, err)
		modules = append(modules, p)
		if _, fromRegistry := c.OCIRef(); fromRegistry {
			must(t, mgr.Add(p.Triggers()[1])) // the tag poller
		}
		loaded[c.Name] = p
	}
	return mgr, loaded
}

func grant(group string, resources []string, verbs ...string) abi.Permission {
	return abi.Permission{Group: group, Resources: resources, Verbs: verbs}
}

var appGrant = []abi.Permission{
	grant("demo.wasmrec.dev", []string{"apps"}, "get", "list", "watch"),
	grant("demo.wasmrec.dev", []string{"apps/status"}, "patch"),
	grant("", []string{"configmaps", "services"}, "get", "list", "watch", "patch"),
	grant("", []string{"events"}, "create"),
}

func createApp(t *testing.T, ns, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.wasmrec.dev/v1", "kind": "App",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
	if _, err := dyn(t).Resource(appGVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// eventually polls f until it returns nil, or fails with its last error.
func eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: still %v after %s", what, err, timeout)
}

// appState is what an App plugin is responsible for, without what necessarily differs between
// two namespaces (UIDs, timestamps, resource versions).
type appState struct {
	ConfigMapData map[string]string
	Owner         metav1.OwnerReference
	ServiceSpec   map[string]any
	Status        map[string]any
}

func readAppState(t *testing.T, ns, name string) (appState, error) {
	cs := kubernetes.NewForConfigOrDie(cfg)
	var s appState
	app, err := dyn(t).Resource(appGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	svc, err := dyn(t).Resource(corev1.SchemeGroupVersion.WithResource("services")).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != app.GetUID() ||
		len(svc.GetOwnerReferences()) != 1 || svc.GetOwnerReferences()[0].UID != app.GetUID() {
		return s, fmt.Errorf("children of %s/%s lack a controller owner reference to it: %v, %v", ns, name, cm.OwnerReferences, svc.GetOwnerReferences())
	}
	s.ConfigMapData, s.Owner = cm.Data, cm.OwnerReferences[0]
	s.Owner.UID = ""
	spec, _, _ := unstructured.NestedMap(svc.Object, "spec")
	s.ServiceSpec = map[string]any{"ports": spec["ports"], "selector": spec["selector"]}
	s.Status, _, _ = unstructured.NestedMap(app.Object, "status")
	if conds, ok := s.Status["conditions"].([]any); ok {
		for _, c := range conds {
			delete(c.(map[string]any), "lastTransitionTime")
		}
	}
	if gen, _, _ := unstructured.NestedInt64(s.Status, "observedGeneration"); gen != app.GetGeneration() {
		return s, fmt.Errorf("%s/%s: status.observedGeneration %d, generation %d", ns, name, gen, app.GetGeneration())
	}
	return s, nil
}

// The Go plugin and the C plugin, given the same Apps, leave the same cluster state: owned
// ConfigMap and Service, status with observedGeneration and a Ready condition.
func TestGoAndCAppPluginsGiveTheSameState(t *testing.T) {
	nsGo, nsC := namespace(t), namespace(t)
	logs := &logLines{}
	pluginHost(t, cfg, logs.logger(),
		plugin.Config{Name: "app", Module: wasmFile(t, "plugins", "app"), Namespaces: []string{nsGo}, Permissions: appGrant},
		plugin.Config{Name: "app-c", Module: wasmFile(t, "plugins", "app-c"), Namespaces: []string{nsC}, Permissions: appGrant},
	)
	spec := map[string]any{"message": `hello "quoted" ünïcode`, "port": int64(8080)}
	for _, ns := range []string{nsGo, nsC} {
		createApp(t, ns, "shop", spec)
	}
	compare := func(step string) {
		var goState, cState appState
		eventually(t, 30*time.Second, step+": the Go plugin's state", func() (err error) { goState, err = readAppState(t, nsGo, "shop"); return err })
		eventually(t, 30*time.Second, step+": the C plugin's state", func() (err error) { cState, err = readAppState(t, nsC, "shop"); return err })
		if !reflect.DeepEqual(goState, cState) {
			t.Fatalf("%s: the plugins disagree:\n  Go: %+v\n   C: %+v", step, goState, cState)
		}
		if goState.ConfigMapData["message"] != spec["message"] {
			t.Fatalf("%s: configmap holds %q, want %q", step, goState.ConfigMapData["message"], spec["message"])
		}
		t.Logf("%s: both plugins left %+v", step, goState)
	}
	compare("created")

	spec = map[string]any{"message": "second", "port": int64(9090)}
	for _, ns := range []string{nsGo, nsC} {
		patch, _ := json.Marshal(map[string]any{"spec": spec})
		if _, err := dyn(t).Resource(appGVR).Namespace(ns).Patch(context.Background(), "shop", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	compare("updated")

	// A deleted child is put back.
	cs := kubernetes.NewForConfigOrDie(cfg)
	must(t, cs.CoreV1().ConfigMaps(nsC).Delete(context.Background(), "shop", metav1.DeleteOptions{}))
	compare("configmap deleted")

	// An invalid port is a terminal error with a Warning event, from both.
	for _, ns := range []string{nsGo, nsC} {
		createApp(t, ns, "bad", map[string]any{"port": int64(70000)})
	}
	for _, ns := range []string{nsGo, nsC} {
		eventually(t, 30*time.Second, "an InvalidPort event in "+ns, func() error {
			evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=InvalidPort"})
			if err != nil || len(evs.Items) == 0 {
				return fmt.Errorf("no event (%v)", err)
			}
			if e := evs.Items[0]; e.Type != "Warning" || e.InvolvedObject.Name != "bad" || !strings.Contains(e.Message, "70000") {
				return fmt.Errorf("event %+v", e)
			}
			return nil
		})
	}
	logs.waitFor(t, 10*time.Second, "terminal error", `plugin \"app\"`, "spec.port 70000 is outside 1-65535")
	logs.waitFor(t, 10*time.Second, "terminal error", `plugin \"app-c\"`, "spec.port 70000 is outside 1-65535")
}

// configHash is the config hash the rollout plugin stamped on Deployment ns/name's pod
// template: "" for none, or no such Deployment.
func configHash(cs kubernetes.Interface, ns, name string) string {
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return d.Spec.Template.Annotations["wasmrec.dev/config-hash"]
}

// The rollout plugin stamps a config hash on an opted-in Deployment's template and a new one when
// its ConfigMap changes; a Deployment that did not opt in is left alone. Its map functions run
// in the plugin: a ConfigMap no Deployment uses enqueues nothing.
func TestRolloutPlugin(t *testing.T) {
	ns := namespace(t)
	m := metrics.New()
	pluginHostWithMetrics(t, cfg, logr.Discard(), m, plugin.Config{Name: "rollout", Module: wasmFile(t, "plugins", "rollout"), Namespaces: []string{ns}, Permissions: []abi.Permission{
		grant("apps", []string{"deployments"}, "get", "list", "watch", "patch"),
		grant("", []string{"configmaps", "secrets"}, "get", "list", "watch"),
		grant("", []string{"events"}, "create"),
	}})
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: demo.WebConfig}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	must(t, err)
	opted := demo.WebDeployment(ns)
	plain := demo.WebDeployment(ns)
	plain.Name, plain.Annotations = "plain", nil
	for _, d := range []*appsv1.Deployment{opted, plain} {
		_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{})
		must(t, err)
	}
	hashOf := func(name string) string { return configHash(cs, ns, name) }
	var first string
	eventually(t, 30*time.Second, "a config hash on the opted-in deployment", func() error {
		if first = hashOf("web"); first == "" {
			return fmt.Errorf("no hash")
		}
		return nil
	})
	_, err = cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), demo.WebConfig, types.MergePatchType, []byte(`{"data":{"k":"2"}}`), metav1.PatchOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "a new hash after the configmap changed", func() error {
		if h := hashOf("web"); h == first || h == "" {
			return fmt.Errorf("hash %q", h)
		}
		return nil
	})
	if h := hashOf("plain"); h != "" {
		t.Fatalf("a deployment that did not opt in got hash %q", h)
	}

	// Nothing writes the Deployments now (no controller-manager runs here), so reconciles come
	// only from what the map functions return.
	count := func(name string, labels map[string]string) float64 { v, _ := value(t, m, name, labels); return v }
	maps := func() float64 {
		return count("wasmrec_plugin_maps_total", map[string]string{"plugin": "rollout", "outcome": "ok"})
	}
	reconciles := func() float64 {
		return count("controller_runtime_reconcile_total", map[string]string{"controller": "rollout", "result": "success"})
	}
	eventually(t, 10*time.Second, "the reconciles of the change to settle", func() error {
		before := reconciles()
		time.Sleep(500 * time.Millisecond)
		if after := reconciles(); after != before {
			return fmt.Errorf("%g reconciles, then %g", before, after)
		}
		return nil
	})
	settled, mapped := reconciles(), maps()
	if mapped == 0 {
		t.Fatalf("no map ran in the plugin")
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unused"}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), "unused", types.MergePatchType, []byte(`{"data":{"k":"2"}}`), metav1.PatchOptions{})
	must(t, err)
	eventually(t, 10*time.Second, "the plugin to map the unused ConfigMap's create and update", func() error {
		if n := maps() - mapped; n < 3 { // the create; the update's old and new object
			return fmt.Errorf("%g maps", n)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	if r := reconciles(); r != settled {
		t.Fatalf("a ConfigMap no Deployment uses made %g reconciles; want none", r-settled)
	}
	for _, outcome := range []string{"error", "timeout"} {
		if n := count("wasmrec_plugin_maps_total", map[string]string{"plugin": "rollout", "outcome": outcome}); n != 0 {
			t.Errorf("%g maps ended in %s", n, outcome)
		}
	}
	evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=ConfigChanged"})
	must(t, err)
	if len(evs.Items) == 0 || evs.Items[0].Source.Component != "wasmrec/rollout" {
		t.Fatalf("no ConfigChanged event from wasmrec/rollout: %+v", evs.Items)
	}
}

// indexBudget is a plugin's memory budget with room for its module's code and, once the code
// has settled (its first release), for nothing more until raise.
type indexBudget struct {
	mu            sync.Mutex
	used, limit   int64
	settled, room bool
}

func (b *indexBudget) Charge(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.settled && !b.room && b.used+n > b.limit {
		return fmt.Errorf("%d bytes more would pass the budget's %d", n, b.limit)
	}
	b.used += n
	return nil
}

func (b *indexBudget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if !b.settled {
		b.settled, b.limit = true, b.used
	}
}

func (b *indexBudget) raise() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.room = true
}

// A field index whose values the plugin's memory budget has no room for is refused, and the
// plugin works on, as right: its map functions' lists hand it every Deployment, which it tests
// itself. The refusal is said once (the hook, the metric) and IndexRefused says it while it
// lasts; once the budget has room, the next list that tells values is charged and kept.
func TestAFieldIndexTheBudgetRefusesLeavesThePluginRight(t *testing.T) {
	ns := namespace(t)
	m := metrics.New()
	budget := &indexBudget{}
	var mu sync.Mutex
	var told []bool
	_, loaded := pluginHostWithMetrics(t, cfg, logr.Discard(), m, plugin.Config{Name: "rollout-budget", Module: wasmFile(t, "plugins", "rollout"), Namespaces: []string{ns},
		Code: budget,
		Hooks: plugin.Hooks{OnIndexRefused: func(refused bool) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, refused)
		}},
		Permissions: []abi.Permission{
			grant("apps", []string{"deployments"}, "get", "list", "watch", "patch"),
			grant("", []string{"configmaps", "secrets"}, "get", "list", "watch"),
			grant("", []string{"events"}, "create"),
		}})
	p := loaded["rollout-budget"]
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: demo.WebConfig}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	must(t, err)
	plain := demo.WebDeployment(ns)
	plain.Name, plain.Annotations = "plain", nil
	for _, d := range []*appsv1.Deployment{demo.WebDeployment(ns), plain} {
		_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{})
		must(t, err)
	}
	hashOf := func(name string) string { return configHash(cs, ns, name) }
	hooks := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(told)
	}
	count := func(name string) float64 {
		v, _ := value(t, m, name, map[string]string{"plugin": "rollout-budget"})
		return v
	}
	first := ""
	// Each change of the ConfigMap is mapped to its users by a list of Deployments through
	// the index, whose values the guest tells with it.
	for i := 2; first == "" || p.IndexRefused() == ""; i++ {
		if i > 20 {
			t.Fatalf("after %d changes of the ConfigMap: hash %q, IndexRefused %q, hooks told %v", i-2, first, p.IndexRefused(), hooks())
		}
		_, err = cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), demo.WebConfig, types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":"%d"}}`, i), metav1.PatchOptions{})
		must(t, err)
		time.Sleep(500 * time.Millisecond)
		first = hashOf("web")
	}
	if got := hooks(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("OnIndexRefused was told %v; want [true]", got)
	}
	if n := count("wasmrec_plugin_index_refusals_total"); n != 1 {
		t.Errorf("wasmrec_plugin_index_refusals_total %g; want 1", n)
	}
	if !strings.Contains(p.IndexRefused(), "every item") {
		t.Errorf("IndexRefused %q does not say what a refusal means", p.IndexRefused())
	}
	// Refused, the plugin is as right: a change still reaches the Deployment that uses it,
	// and not the other.
	_, err = cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), demo.WebConfig, types.MergePatchType, []byte(`{"data":{"k":"refused"}}`), metav1.PatchOptions{})
	must(t, err)
	eventually(t, 30*time.Second, "a new hash while the index is refused", func() error {
		if h := hashOf("web"); h == first || h == "" {
			return fmt.Errorf("hash %q", h)
		}
		return nil
	})
	if h := hashOf("plain"); h != "" {
		t.Fatalf("a deployment that did not opt in got hash %q", h)
	}
	if n := count("wasmrec_plugin_index_refusals_total"); n != 1 {
		t.Errorf("lists while refused counted again: wasmrec_plugin_index_refusals_total %g; want 1", n)
	}

	// With room, the next list's values are charged and kept.
	budget.raise()
	eventually(t, 30*time.Second, "the index kept again once the budget has room", func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), demo.WebConfig, types.MergePatchType, fmt.Appendf(nil, `{"data":{"k":"%d"}}`, time.Now().UnixNano()), metav1.PatchOptions{})
		must(t, err)
		if p.IndexRefused() != "" || count("wasmrec_plugin_index_bytes") == 0 {
			return fmt.Errorf("IndexRefused %q, wasmrec_plugin_index_bytes %g", p.IndexRefused(), count("wasmrec_plugin_index_bytes"))
		}
		return nil
	})
	if got := hooks(); !slices.Equal(got, []bool{true, false}) {
		t.Errorf("OnIndexRefused was told %v; want [true false]", got)
	}
}

// The failing plugin's retries follow 5ms * 2^n through the wasm runtime too.
func TestFailingPluginFollowsTheBackoffSchedule(t *testing.T) {
	const failures = 10
	ns := namespace(t)
	logs := &logLines{}
	pluginHost(t, cfg, logs.logger(), plugin.Config{Name: "failing", Module: wasmFile(t, "plugins", "failing"), Namespaces: []string{ns},
		Permissions: []abi.Permission{grant("", []string{"configmaps"}, "list", "watch")}})
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "flaky", Labels: map[string]string{"wasmrec.dev/demo": "always-fails"}}}, metav1.CreateOptions{})
	must(t, err)
	logs.waitFor(t, 30*time.Second, fmt.Sprintf("failing on purpose (attempt %d for %s/flaky)", failures+1, ns))
	var times []time.Time
	for n := 1; n <= failures+1; n++ {
		_, ts := logs.matching(fmt.Sprintf("failing on purpose (attempt %d for %s/flaky)", n, ns))
		if len(ts) != 1 {
			t.Fatalf("attempt %d logged %d times", n, len(ts))
		}
		times = append(times, ts[0])
	}
	var report []string
	for n := range failures {
		gap, want := times[n+1].Sub(times[n]), controller.DefaultBaseDelay<<n
		report = append(report, fmt.Sprintf("%s (want %s)", gap.Round(100*time.Microsecond), want))
		if slack := 100*time.Millisecond + want/10; gap < want-time.Millisecond || gap > want+slack {
			t.Errorf("retry %d came %s after the previous attempt, want %s (+%s at most)", n+1, gap, want, slack)
		}
	}
	t.Logf("retry gaps: %s", strings.Join(report, ", "))
}

// recordingTransport remembers every request the host sends to the API server, through each
// of its clients' transports (wrap): a client made after others have started sending changes
// nothing they use.
type recordingTransport struct {
	mu   sync.Mutex
	seen []string
}

func (r *recordingTransport) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A trap, a loop, a memory bomb, garbage results and a call outside the grant are each a clear
// error; the host keeps running and another plugin beside it keeps working. A forbidden call
// never reaches the API server.
func TestMisbehavingPluginIsContained(t *testing.T) {
	ns := namespace(t)
	logs := &logLines{}
	recorder := &recordingTransport{}
	restCfg := rest.CopyConfig(cfg)
	restCfg.WrapTransport = recorder.wrap
	one := metav1.Duration{Duration: time.Second}
	_, plugins := pluginHost(t, restCfg, logs.logger(),
		plugin.Config{Name: "misbehave", Module: wasmFile(t, "testguests", "misbehave"), Namespaces: []string{ns}, MaxConcurrentReconciles: 3, Timeout: &one,
			MemoryLimit: ptrTo(resourceMi(8)), Permissions: []abi.Permission{grant("", []string{"configmaps"}, "get", "list", "watch")}},
		plugin.Config{Name: "app", Module: wasmFile(t, "plugins", "app"), Namespaces: []string{ns}, Permissions: appGrant},
	)
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "precious"}}, metav1.CreateOptions{})
	must(t, err)
	misbehaving(t, ns, "trap", "loop", "bomb", "garbage", "badflags", "forbidden")
	for name, want := range map[string]string{
		"trap":     "reconcile trapped",
		"loop":     "reconcile timed out after 1s, the plugin's timeout",
		"bomb":     "reconcile trapped",
		"garbage":  "malformed result envelope",
		"badflags": "unknown flags",
	} {
		line := logs.waitFor(t, 30*time.Second, "reconciler error", `"name"="`+name+`"`, `plugin \"misbehave\"`, want)
		// It names the reconcile as the plugin's own lines do.
		if !strings.Contains(line, `"reconcileID"="misbehave-`) || !strings.Contains(line, `"digest"="`) {
			t.Errorf("the error line has no reconcileID and digest: %s", line)
		}
	}
	// A timeout's log line has where the guest was stopped: the C guest's function, by name.
	if line := logs.waitFor(t, 30*time.Second, "reconciler error", `"name"="loop"`, "timed out"); !strings.Contains(line, ".reconcile(i32) i64") {
		t.Errorf("the timeout's line has no stack naming the looping function: %s", line)
	}
	line := logs.waitFor(t, 30*time.Second, "delete secret returned status 4")
	if !strings.Contains(line, `forbidden: delete Secret.v1: plugin \"misbehave\" may delete nothing in API group core`) {
		t.Errorf("the forbidden call's message does not say why: %s", line)
	}

	// Meanwhile the other plugin works.
	createApp(t, ns, "steady", map[string]any{"message": "m"})
	eventually(t, 30*time.Second, "the app plugin beside the misbehaving one", func() error { _, err := readAppState(t, ns, "steady"); return err })

	if _, err := cs.CoreV1().Secrets(ns).Get(context.Background(), "precious", metav1.GetOptions{}); err != nil {
		t.Fatalf("the secret the plugin tried to delete: %v", err)
	}
	recorder.mu.Lock()
	for _, r := range recorder.seen {
		if strings.HasPrefix(r, "DELETE") && strings.Contains(r, "/secrets") {
			t.Errorf("the API server saw %s", r)
		}
	}
	recorder.mu.Unlock()
	s := plugins["misbehave"].Module().Stats()
	if s.Traps < 2 || s.Timeouts < 1 || s.BadResults < 2 {
		t.Errorf("stats: traps %d timeouts %d bad results %d; want at least 2, 1, 2", s.Traps, s.Timeouts, s.BadResults)
	}
}

// Modules that must not run are refused at load, each with a message that says what to do.
func TestBadModulesAreRefusedAtLoad(t *testing.T) {
	mgr, err := manager.New(cfg, manager.Options{})
	must(t, err)
	host, err := plugin.NewHost(mgr, plugin.HostOptions{Engine: sharedEngine(t)})
	must(t, err)
	defer host.Close()
	for _, tc := range []struct {
		cfg  plugin.Config
		want []string
	}{
		{plugin.Config{Name: "v7", Module: wasmFile(t, "testguests", "abi7")}, []string{`plugin "v7"`, "plugin speaks ABI v7, host speaks v1"}},
		{plugin.Config{Name: "imports", Module: wasmFile(t, "testguests", "badimport")}, []string{`invalid import["env"."launch_missiles"]`}},
		{plugin.Config{Name: "greedy", Module: wasmFile(t, "plugins", "app"), Permissions: []abi.Permission{grant("demo.wasmrec.dev", []string{"apps"}, "get", "list", "watch")}},
			[]string{`plugin "greedy"`, "asks for permissions it was not granted", "patch core/configmaps", "create core/events", "patch demo.wasmrec.dev/apps/status"}},
		{plugin.Config{Name: "missing", Module: "/no/such/plugin.wasm"}, []string{`plugin "missing"`, "no such file"}},
	} {
		_, err := host.FetchAndLoad(context.Background(), tc.cfg)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err = %v, want it to contain %q", tc.cfg.Name, err, w)
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func resourceMi(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }

// Every host call against the real API server, with the statuses a guest tests for: create,
// already exists, update, conflict, list, update_status, delete, not found, event; and the
// guest's stdout in the host log, tagged with its reconcile.
func TestEveryHostCall(t *testing.T) {
	ns := namespace(t)
	logs := &logLines{}
	pluginHost(t, cfg, logs.logger(), plugin.Config{Name: "crud", Module: wasmFile(t, "testguests", "crud-go"), Namespaces: []string{ns}, Permissions: []abi.Permission{
		grant("", []string{"configmaps"}, "get", "list", "watch", "create", "update", "delete"),
		grant("demo.wasmrec.dev", []string{"apps"}, "get", "list", "watch"),
		grant("demo.wasmrec.dev", []string{"apps/status"}, "update"),
		grant("", []string{"events"}, "create"),
	}})
	createApp(t, ns, "crud-app", map[string]any{})
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "crud", Labels: map[string]string{"wasmrec.dev/crud": "yes"}}, Data: map[string]string{"app": "crud-app"}}, metav1.CreateOptions{})
	must(t, err)

	logs.waitFor(t, 30*time.Second, "crud: all steps passed")
	if lines, _ := logs.matching("reconciler error", `plugin \"crud\"`); len(lines) > 0 {
		t.Fatalf("a step failed: %s", lines[0])
	}
	line := logs.waitFor(t, 5*time.Second, "crud: hello from stdout")
	for _, want := range []string{`"stream"="stdout"`, `"plugin"="crud"`, `"reconcileID"="crud-`, `"request"="` + ns + `/crud"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the stdout line lacks %s: %s", want, line)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "crud-child", metav1.GetOptions{}); err == nil {
		t.Error("the child the guest deleted still exists")
	}
	app, err := dyn(t).Resource(appGVR).Namespace(ns).Get(context.Background(), "crud-app", metav1.GetOptions{})
	must(t, err)
	if note, _, _ := unstructured.NestedString(app.Object, "status", "configMap"); note != "updated by crud" {
		t.Errorf("status.configMap = %q, want the guest's status update", note)
	}
	eventually(t, 10*time.Second, "the CrudDone event", func() error {
		evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=CrudDone"})
		if err != nil || len(evs.Items) == 0 || evs.Items[0].InvolvedObject.Name != "crud" || evs.Items[0].InvolvedObject.UID == "" {
			return fmt.Errorf("no event about the configmap, with its uid (%v)", err)
		}
		return nil
	})
}

// runCrud runs the crud guest in a namespace of its own, with the settings of c, and gives it
// its App and ConfigMap to work on.
func runCrud(t *testing.T, logs *logLines, m *metrics.Metrics, c plugin.Config) {
	t.Helper()
	ns := namespace(t)
	c.Name, c.Module, c.Namespaces = "crud", wasmFile(t, "testguests", "crud-go"), []string{ns}
	c.Permissions = []abi.Permission{
		grant("", []string{"configmaps"}, "get", "list", "watch", "create", "update", "delete"),
		grant("demo.wasmrec.dev", []string{"apps"}, "get", "list", "watch"),
		grant("demo.wasmrec.dev", []string{"apps/status"}, "update"),
		grant("", []string{"events"}, "create"),
	}
	pluginHostWithMetrics(t, cfg, logs.logger(), m, c)
	createApp(t, ns, "crud-app", map[string]any{})
	_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "crud", Labels: map[string]string{"wasmrec.dev/crud": "yes"}}, Data: map[string]string{"app": "crud-app"}}, metav1.CreateOptions{})
	must(t, err)
}

// A plugin's writes pass its own token bucket: one that writes faster than its limit gets a
// timeout status naming the limit once the reconcile's deadline is near, and the API server is
// spared the rest.
func TestWriteRateLimit(t *testing.T) {
	logs := &logLines{}
	two := metav1.Duration{Duration: 2 * time.Second}
	runCrud(t, logs, nil, plugin.Config{Timeout: &two, Writes: plugin.CallLimit{QPS: 0.2, Burst: 1}})
	// The first create takes the only token; the second write waits for a refill 5s away,
	// which the 2s deadline does not allow.
	logs.waitFor(t, 30*time.Second, "reconciler error", `plugin \"crud\"`, "timeout", "write rate limit (0.2/s, burst 1)")
	if lines, _ := logs.matching("crud: all steps passed"); len(lines) > 0 {
		t.Fatal("every write went through despite the limit")
	}
}

// A plugin held back by its own write limit gets its writes through, and says so: a log line
// (once, however many writes wait) and the wait metrics.
func TestWriteRateLimitWaitIsVisible(t *testing.T) {
	logs := &logLines{}
	m := metrics.New()
	runCrud(t, logs, m, plugin.Config{Writes: plugin.CallLimit{QPS: 4, Burst: 1}})
	logs.waitFor(t, 30*time.Second, "crud: all steps passed")
	if lines, _ := logs.matching("writes are waiting on the plugin's write rate limit", `"plugin"="crud"`, `"qps"=4`, `"burst"=1`); len(lines) != 1 {
		t.Errorf("%d lines say the writes waited, want 1: %v", len(lines), lines)
	}
	waits, _ := value(t, m, "wasmrec_plugin_write_limit_waits_total", map[string]string{"plugin": "crud"})
	seconds, _ := value(t, m, "wasmrec_plugin_write_limit_wait_seconds_total", map[string]string{"plugin": "crud"})
	if waits < 3 || seconds < 0.5 {
		t.Errorf("wait metrics: %g writes, %gs; want the crud guest's writes past the first (at least 3) to have waited about 0.25s each", waits, seconds)
	}
}
