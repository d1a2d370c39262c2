package pluginobjects

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/host/plugin"
)

func pluginObject(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	return objectOf(t, `"kind":"Plugin","metadata":{"name":"labeler","namespace":"team-a","generation":3}`, spec)
}

func clusterPluginObject(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	return objectOf(t, `"kind":"ClusterPlugin","metadata":{"name":"labeler","generation":3}`, spec)
}

func objectOf(t *testing.T, head, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"wasmrec.dev/v1alpha1",` + head + `,"spec":` + spec + `}`)); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestAPluginActsAsItsServiceAccountInsideItsNamespace(t *testing.T) {
	cfg, paused, err := ConfigOf(pluginObject(t, `{"module":"oci://reg/labeler:v1","serviceAccountName":"labeler","maxConcurrentReconciles":2,"paused":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "team-a.labeler" || cfg.Module != "oci://reg/labeler:v1" || cfg.MaxConcurrentReconciles != 2 || !paused {
		t.Errorf("ConfigOf = %+v, paused %v", cfg, paused)
	}
	if cfg.ServiceAccount == nil || cfg.ServiceAccount.User() != "system:serviceaccount:team-a:labeler" {
		t.Errorf("acts as %v; want team-a's ServiceAccount labeler", cfg.ServiceAccount)
	}
	if !cfg.Confined || len(cfg.Namespaces) != 1 || cfg.Namespaces[0] != "team-a" {
		t.Errorf("namespaces %v, confined %v; want team-a only, confined", cfg.Namespaces, cfg.Confined)
	}
	if cfg.Origin != "Plugin team-a/labeler" {
		t.Errorf("Origin %q: a clash of names must say where the settings come from", cfg.Origin)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("a Plugin's plugin name is not valid: %v", err)
	}
	for spec, want := range map[string]string{
		`{"module":"x.wasm"}`: "spec.serviceAccountName is required",
		`{"module":"x.wasm","serviceAccountName":"a","namespaces":["team-b"]}`:            "spec.namespaces is a ClusterPlugin's",
		`{"module":"x.wasm","serviceAccount":{"namespace":"kube-system","name":"admin"}}`: "spec.serviceAccount is a ClusterPlugin's",
		`{"module":"x.wasm","serviceAccountName":"a","maxConcurrentReconciles":"four"}`:   "fix the object",
		`{"module":"x.wasm","serviceAccountName":"a","maxConcurentReconciles":4}`:         `unknown field "maxConcurentReconciles"`,
		`{"module":"x.wasm","serviceAccountName":"Not_A_Name"}`:                           "not a valid name",
	} {
		if _, _, err := ConfigOf(pluginObject(t, spec)); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Plugin team-a/labeler") {
			t.Errorf("%s: %v; want an error naming the object and saying %q", spec, err, want)
		}
	}
}

func TestAClusterPluginNamesItsServiceAccount(t *testing.T) {
	cfg, _, err := ConfigOf(clusterPluginObject(t, `{"module":"x.wasm","serviceAccount":{"namespace":"ops","name":"labeler"},"namespaces":["a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "labeler" || cfg.Confined || cfg.ServiceAccount.User() != "system:serviceaccount:ops:labeler" || len(cfg.Namespaces) != 2 {
		t.Errorf("ConfigOf = %+v (%v)", cfg, cfg.ServiceAccount)
	}
	for spec, want := range map[string]string{
		`{"module":"x.wasm"}`:                                "spec.serviceAccount {namespace, name} is required",
		`{"module":"x.wasm","serviceAccountName":"labeler"}`: "spec.serviceAccountName is a Plugin's",
	} {
		if _, _, err := ConfigOf(clusterPluginObject(t, spec)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", spec, err, want)
		}
	}
}

// conditions reads the conditions of a status statusOf made, as the API server would store them.
func conditions(t *testing.T, st map[string]any) []metav1.Condition {
	t.Helper()
	b, _ := json.Marshal(st["conditions"])
	var out []metav1.Condition
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func want(t *testing.T, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case status == "" && c != nil:
		t.Errorf("%s is set (%s, %s); want it absent", typ, c.Status, c.Reason)
	case status == "":
	case c == nil:
		t.Errorf("no %s condition; want %s %s", typ, status, reason)
	case c.Status != status || c.Reason != reason || c.ObservedGeneration != 3:
		t.Errorf("%s = %s %s (generation %d); want %s %s (3)", typ, c.Status, c.Reason, c.ObservedGeneration, status, reason)
	}
}

func TestStatusSaysWhatServes(t *testing.T) {
	u := pluginObject(t, `{"module":"x.wasm"}`)
	things := []schema.GroupVersionKind{{Group: "follow.wasmrec.dev", Version: "v1", Kind: "Thing"}}

	st := statusOf(u, nil, &failure{reason: "FetchFailed", msg: "plugin \"labeler\": reading its module: no such file"}, false)
	c := conditions(t, st)
	want(t, c, "Ready", metav1.ConditionFalse, "NotLoaded")
	want(t, c, "Degraded", metav1.ConditionTrue, "FetchFailed")
	want(t, c, "Running", "", "")
	if st["lastError"] != "plugin \"labeler\": reading its module: no such file" {
		t.Errorf("lastError %v", st["lastError"])
	}

	if _, ok := st["refusals"]; ok {
		t.Error("a module that could not be fetched counted as a refusal")
	}
	refused := statusOf(u, nil, &failure{reason: "Refused", msg: "plugin speaks ABI v7", refusals: 1}, false)
	want(t, conditions(t, refused), "Degraded", metav1.ConditionTrue, "Refused")
	if refused["refusals"] != int64(1) {
		t.Errorf("refusals %v for a module refused at load; want 1", refused["refusals"])
	}

	st = statusOf(u, &serving{digest: "sha256:a", swaps: 2, refusals: 1, lastErr: "asks for secrets", lastWhy: "SwapRefused", kinds: things}, nil, false)
	c = conditions(t, st)
	want(t, c, "Ready", metav1.ConditionTrue, "Serving")
	want(t, c, "Degraded", metav1.ConditionTrue, "SwapRefused")
	want(t, c, "Running", metav1.ConditionFalse, "Waiting")
	if m := meta.FindStatusCondition(c, "Running").Message; !strings.Contains(m, "Thing") {
		t.Errorf("Running's message %q does not name the kind it waits for", m)
	}
	if st["activeDigest"] != "sha256:a" || st["swaps"] != int64(2) || st["refusals"] != int64(1) {
		t.Errorf("status %v", st)
	}

	healthy := statusOf(u, &serving{digest: "sha256:b", running: true, kinds: things}, nil, false)
	c = conditions(t, healthy)
	want(t, c, "Degraded", metav1.ConditionFalse, "Healthy")
	want(t, c, "Running", metav1.ConditionTrue, "Reconciling")
	if v, ok := healthy["lastError"]; !ok || v != nil {
		t.Errorf("lastError %v, %v; want null, which removes it in a merge patch", v, ok)
	}

	unavailable := statusOf(u, &serving{digest: "sha256:b", running: true, kinds: things, unavailable: []string{"the host cannot list core/secrets in prod: grant its ServiceAccount list and watch on them"}}, nil, false)
	c = conditions(t, unavailable)
	want(t, c, "Ready", metav1.ConditionTrue, "Serving")
	want(t, c, "Degraded", metav1.ConditionTrue, "Unavailable")
	if m := meta.FindStatusCondition(c, "Degraded").Message; !strings.Contains(m, "list core/secrets in prod") {
		t.Errorf("Degraded's message %q does not name what the host cannot list", m)
	}

	// A plugin whose every reconcile fails is Degraded, saying so, though it serves.
	failing := statusOf(u, &serving{digest: "sha256:b", running: true, kinds: things, failing: "every reconcile since 2026-01-01T00:00:00Z has failed (5 or more in a row); the last error: boom"}, nil, false)
	c = conditions(t, failing)
	want(t, c, "Ready", metav1.ConditionTrue, "Serving")
	want(t, c, "Degraded", metav1.ConditionTrue, "ReconcilesFailing")
	if m := meta.FindStatusCondition(c, "Degraded").Message; !strings.Contains(m, "the last error: boom") {
		t.Errorf("Degraded's message %q does not give the last error", m)
	}

	// One whose field index the memory budget has no room for works, slower: it is Degraded,
	// saying why, and a failing plugin's reason comes first.
	indexed := statusOf(u, &serving{digest: "sha256:b", running: true, kinds: things, indexRefused: "the memory budget has no room for the values of its field indexes"}, nil, false)
	c = conditions(t, indexed)
	want(t, c, "Ready", metav1.ConditionTrue, "Serving")
	want(t, c, "Degraded", metav1.ConditionTrue, ReasonIndexOverBudget)
	if m := meta.FindStatusCondition(c, "Degraded").Message; !strings.Contains(m, "field indexes") {
		t.Errorf("Degraded's message %q does not say what the budget refused", m)
	}
	both := statusOf(u, &serving{digest: "sha256:b", running: true, kinds: things, failing: "every reconcile failed", indexRefused: "no room"}, nil, false)
	want(t, conditions(t, both), "Degraded", metav1.ConditionTrue, "ReconcilesFailing")

	// One waiting for a kind no API serves is not Ready, and says what was meant.
	waiting := statusOf(u, &serving{digest: "sha256:b", kinds: things, waiting: []string{"Thng.v1.follow.wasmrec.dev (no CRD serves it: did you mean Thing, which follow.wasmrec.dev serves?)"}}, nil, false)
	c = conditions(t, waiting)
	want(t, c, "Ready", metav1.ConditionFalse, "WaitingForKinds")
	want(t, c, "Degraded", metav1.ConditionFalse, "Healthy")
	if m := meta.FindStatusCondition(c, "Ready").Message; !strings.Contains(m, "did you mean Thing") {
		t.Errorf("Ready's message %q does not say what was meant", m)
	}

	paused := pluginObject(t, `{"module":"x.wasm","paused":true}`)
	want(t, conditions(t, statusOf(paused, nil, nil, false)), "Ready", metav1.ConditionFalse, "Paused")
}

func TestAConditionMovesItsTransitionTimeOnlyWhenItsStatusDoes(t *testing.T) {
	u := pluginObject(t, `{"module":"x.wasm"}`)
	s := &serving{digest: "sha256:a", running: true}
	first := statusOf(u, s, nil, false)
	if err := unstructured.SetNestedField(u.Object, mustJSON(t, first), "status"); err != nil {
		t.Fatal(err)
	}
	before := meta.FindStatusCondition(conditions(t, first), "Ready").LastTransitionTime
	time.Sleep(1100 * time.Millisecond) // transition times have a second's resolution
	again := conditions(t, statusOf(u, s, nil, false))
	if got := meta.FindStatusCondition(again, "Ready").LastTransitionTime; !got.Equal(&before) {
		t.Errorf("Ready's lastTransitionTime moved from %v to %v with its status unchanged", before, got)
	}
	s.lastErr = "refused"
	degraded := conditions(t, statusOf(u, s, nil, false))
	if got := meta.FindStatusCondition(degraded, "Degraded").LastTransitionTime; got.Equal(&before) {
		t.Error("Degraded went True and its lastTransitionTime stayed")
	}
}

// mustJSON turns a status into what unstructured holds (JSON types only).
func mustJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// status.rollout is written whole as a merge patch: fields a running rollout does not have yet
// (ended, differences) are null, so that a previous rollout's are removed.
func TestRolloutStatusRemovesWhatAPreviousRolloutLeft(t *testing.T) {
	if got := rolloutOf(nil); got != nil {
		t.Errorf("no rollout: %v; want null", got)
	}
	m := rolloutOf(&plugin.RolloutStatus{Stage: plugin.StageCanary, Step: "canary 25%", Candidate: "sha256:b"}).(map[string]any)
	for _, k := range []string{"ended", "differences"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("%s: %v (present %v); want null", k, v, ok)
		}
	}
	if m["stage"] != plugin.StageCanary || m["candidate"] != "sha256:b" {
		t.Errorf("rollout patch %v", m)
	}
}
