package objects

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func pluginObject(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{"apiVersion":"wasmrec.dev/v1alpha1","kind":"Plugin","metadata":{"name":"labeler","generation":3},"spec":` + spec + `}`)); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestConfigOfTakesTheNameFromTheObject(t *testing.T) {
	cfg, paused, err := ConfigOf(pluginObject(t, `{"module":"oci://reg/labeler:v1","maxConcurrentReconciles":2,"paused":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "labeler" || cfg.Module != "oci://reg/labeler:v1" || cfg.MaxConcurrentReconciles != 2 || !paused {
		t.Errorf("ConfigOf = %+v, paused %v", cfg, paused)
	}
	if cfg.Origin != `Plugin object "labeler"` {
		t.Errorf("Origin %q: a clash of names must say where the settings come from", cfg.Origin)
	}
	if _, _, err := ConfigOf(pluginObject(t, `{"module":"x.wasm","maxConcurrentReconciles":"four"}`)); err == nil || !strings.Contains(err.Error(), "fix the Plugin object") {
		t.Errorf("a spec that is not a plugin's settings: %v", err)
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
