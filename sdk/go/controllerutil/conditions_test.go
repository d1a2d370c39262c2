package controllerutil_test

import (
	"testing"
	"time"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
	"github.com/wasmrec/wasmrec/sdk/go/controllerutil"
)

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(time.Hour)
	t2 = t0.Add(2 * time.Hour)
)

// clock is a now that says when it was asked.
type clock struct{ called int }

func (c *clock) now() time.Time { c.called++; return t2 }

func withConditions(t *testing.T, conds string) *wasmrec.Object {
	return obj(t, `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","metadata":{"name":"web"},"status":{"conditions":`+conds+`}}`)
}

// ready is a stored Ready condition: True since t0, reason Applied, generation 3.
const ready = `{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Applied","message":"all applied","observedGeneration":3}`

// Each of apimachinery's meta.SetStatusCondition rules, one case each.
func TestSetStatusCondition(t *testing.T) {
	readyTrue := controllerutil.Condition{Type: "Ready", Status: controllerutil.ConditionTrue, Reason: "Applied", Message: "all applied", ObservedGeneration: 3}
	with := func(f func(*controllerutil.Condition)) controllerutil.Condition { c := readyTrue; f(&c); return c }
	for _, tc := range []struct {
		name       string
		before     string // status.conditions, "" for an object without status
		set        controllerutil.Condition
		changed    bool
		askedNow   bool
		conditions string
	}{
		{"a new type is appended, lastTransitionTime now", `[]`, readyTrue, true, true,
			`[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T05:04:05Z","reason":"Applied","message":"all applied","observedGeneration":3}]`},
		{"a new type keeps the lastTransitionTime given", `[]`, with(func(c *controllerutil.Condition) { c.LastTransitionTime = t1 }), true, false,
			`[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T04:04:05Z","reason":"Applied","message":"all applied","observedGeneration":3}]`},
		{"status and conditions are made when missing; observedGeneration 0 is left out, reason and message kept even empty", "",
			controllerutil.Condition{Type: "Ready", Status: controllerutil.ConditionUnknown}, true, true,
			`[{"type":"Ready","status":"Unknown","lastTransitionTime":"2026-01-02T05:04:05Z","reason":"","message":""}]`},
		{"a new type goes after the others", `[{"type":"Synced","status":"True"}]`, readyTrue, true, true,
			`[{"type":"Synced","status":"True"},{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T05:04:05Z","reason":"Applied","message":"all applied","observedGeneration":3}]`},
		{"the same condition again changes nothing", `[` + ready + `]`, readyTrue, false, false, `[` + ready + `]`},
		{"the same status with another lastTransitionTime changes nothing: the time moves only with the status",
			`[` + ready + `]`, with(func(c *controllerutil.Condition) { c.LastTransitionTime = t1 }), false, false, `[` + ready + `]`},
		{"a new status moves lastTransitionTime to now", `[` + ready + `]`, with(func(c *controllerutil.Condition) { c.Status = controllerutil.ConditionFalse }), true, true,
			`[{"type":"Ready","status":"False","lastTransitionTime":"2026-01-02T05:04:05Z","reason":"Applied","message":"all applied","observedGeneration":3}]`},
		{"a new status moves lastTransitionTime to the time given", `[` + ready + `]`,
			with(func(c *controllerutil.Condition) { c.Status = controllerutil.ConditionFalse; c.LastTransitionTime = t1 }), true, false,
			`[{"type":"Ready","status":"False","lastTransitionTime":"2026-01-02T04:04:05Z","reason":"Applied","message":"all applied","observedGeneration":3}]`},
		{"a new reason alone: changed, lastTransitionTime kept", `[` + ready + `]`, with(func(c *controllerutil.Condition) { c.Reason = "Reapplied" }), true, false,
			`[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Reapplied","message":"all applied","observedGeneration":3}]`},
		{"a new message alone: changed, lastTransitionTime kept", `[` + ready + `]`, with(func(c *controllerutil.Condition) { c.Message = "m" }), true, false,
			`[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Applied","message":"m","observedGeneration":3}]`},
		{"a new observedGeneration alone: changed, lastTransitionTime kept", `[` + ready + `]`, with(func(c *controllerutil.Condition) { c.ObservedGeneration = 4 }), true, false,
			`[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Applied","message":"all applied","observedGeneration":4}]`},
		{"observedGeneration back to 0 is left out", `[` + ready + `]`, with(func(c *controllerutil.Condition) { c.ObservedGeneration = 0 }), true, false,
			`[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Applied","message":"all applied"}]`},
		{"the condition keeps its place, and fields of its own", `[{"type":"A","status":"True"},{"type":"Ready","status":"True","severity":"Info"},{"type":"B","status":"True"}]`,
			with(func(c *controllerutil.Condition) { c.Status = controllerutil.ConditionFalse }), true, true,
			`[{"type":"A","status":"True"},{"type":"Ready","status":"False","severity":"Info","lastTransitionTime":"2026-01-02T05:04:05Z","reason":"Applied","message":"all applied","observedGeneration":3},{"type":"B","status":"True"}]`},
		{"of two of the type, the first is set", `[{"type":"Ready","status":"False"},{"type":"Ready","status":"False"}]`, with(func(c *controllerutil.Condition) { c.ObservedGeneration = 0 }), true, true,
			`[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T05:04:05Z","reason":"Applied","message":"all applied"},{"type":"Ready","status":"False"}]`},
		{"conditions that are not a list are replaced", `"broken"`, readyTrue, true, true,
			`[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T05:04:05Z","reason":"Applied","message":"all applied","observedGeneration":3}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := obj(t, `{"apiVersion":"demo.wasmrec.dev/v1","kind":"App","metadata":{"name":"web"}}`)
			if tc.before != "" {
				o = withConditions(t, tc.before)
			}
			var c clock
			if got := controllerutil.SetStatusConditionAt(o, tc.set, c.now); got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
			if (c.called > 0) != tc.askedNow {
				t.Errorf("now called %d times, want called: %v", c.called, tc.askedNow)
			}
			sameJSON(t, "status.conditions", jsonOf(t, o, "status", "conditions"), tc.conditions)
		})
	}

	// A status that is not an object is left alone.
	o := obj(t, `{"apiVersion":"v1","kind":"X","metadata":{"name":"x"},"status":"fine"}`)
	if controllerutil.SetStatusCondition(o, readyTrue) || jsonOf(t, o, "status") != `"fine"` {
		t.Errorf("a status that is a string: set it to %s", jsonOf(t, o, "status"))
	}

	// Without an injected clock, the time is the wall clock's, to the second.
	o = withConditions(t, `[]`)
	before := time.Now().Truncate(time.Second)
	controllerutil.SetStatusCondition(o, readyTrue)
	if got := controllerutil.FindStatusCondition(o, "Ready").LastTransitionTime; got.Before(before) || got.After(time.Now()) {
		t.Errorf("lastTransitionTime = %v, want about now (%v)", got, before)
	}
}

func TestFindStatusCondition(t *testing.T) {
	o := withConditions(t, `[{"type":"Synced","status":"False"},`+ready+`,{"type":"Ready","status":"False"},"not a condition"]`)
	got := controllerutil.FindStatusCondition(o, "Ready")
	want := controllerutil.Condition{Type: "Ready", Status: controllerutil.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: t0, Reason: "Applied", Message: "all applied"}
	if got == nil || *got != want {
		t.Fatalf("FindStatusCondition(Ready) = %+v, want the first Ready, %+v", got, want)
	}
	got.Status = controllerutil.ConditionFalse // a copy: the object keeps its own
	if !controllerutil.IsStatusConditionTrue(o, "Ready") {
		t.Error("changing the condition found changed the object")
	}
	if got := controllerutil.FindStatusCondition(o, "Missing"); got != nil {
		t.Errorf("FindStatusCondition(Missing) = %+v", got)
	}
	if got := controllerutil.FindStatusCondition(obj(t, `{"metadata":{}}`), "Ready"); got != nil {
		t.Errorf("no status: FindStatusCondition = %+v", got)
	}
}

func TestIsStatusCondition(t *testing.T) {
	o := withConditions(t, `[{"type":"Ready","status":"True"},{"type":"Synced","status":"False"},{"type":"Healthy","status":"Unknown"},{"type":"Ready","status":"False"}]`)
	for _, tc := range []struct {
		typ             string
		isTrue, isFalse bool
	}{
		{"Ready", true, false}, // the first of the type decides
		{"Synced", false, true},
		{"Healthy", false, false},
		{"Missing", false, false},
	} {
		if got := controllerutil.IsStatusConditionTrue(o, tc.typ); got != tc.isTrue {
			t.Errorf("IsStatusConditionTrue(%s) = %v", tc.typ, got)
		}
		if got := controllerutil.IsStatusConditionFalse(o, tc.typ); got != tc.isFalse {
			t.Errorf("IsStatusConditionFalse(%s) = %v", tc.typ, got)
		}
	}
	if !controllerutil.IsStatusConditionPresentAndEqual(o, "Healthy", controllerutil.ConditionUnknown) ||
		controllerutil.IsStatusConditionPresentAndEqual(o, "Missing", "") {
		t.Error("IsStatusConditionPresentAndEqual")
	}
}

func TestRemoveStatusCondition(t *testing.T) {
	o := withConditions(t, `[{"type":"Ready","status":"True"},{"type":"Synced","status":"False"},{"type":"Ready","status":"False"}]`)
	if !controllerutil.RemoveStatusCondition(o, "Ready") {
		t.Error("RemoveStatusCondition(Ready) = false")
	}
	sameJSON(t, "status.conditions", jsonOf(t, o, "status", "conditions"), `[{"type":"Synced","status":"False"}]`)
	if controllerutil.RemoveStatusCondition(o, "Ready") {
		t.Error("RemoveStatusCondition(Ready) again = true")
	}
	if !controllerutil.RemoveStatusCondition(o, "Synced") {
		t.Error("RemoveStatusCondition(Synced) = false")
	}
	sameJSON(t, "status.conditions", jsonOf(t, o, "status", "conditions"), `[]`)
	if controllerutil.RemoveStatusCondition(obj(t, `{"metadata":{}}`), "Ready") {
		t.Error("no status: RemoveStatusCondition = true")
	}
}

// Conditions round-trip: what SetStatusCondition writes, FindStatusCondition reads back, the
// time to the second as the API server keeps it.
func TestConditionRoundTrip(t *testing.T) {
	o := withConditions(t, `[]`)
	set := controllerutil.Condition{Type: "Ready", Status: controllerutil.ConditionFalse, ObservedGeneration: 7,
		LastTransitionTime: time.Date(2026, 5, 6, 7, 8, 9, 999, time.FixedZone("x", 3600)), Reason: "Waiting", Message: "for the Service"}
	controllerutil.SetStatusCondition(o, set)
	got := controllerutil.FindStatusCondition(o, "Ready")
	want := set
	want.LastTransitionTime = time.Date(2026, 5, 6, 6, 8, 9, 0, time.UTC)
	if got == nil || *got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
}
