package meta_test

import (
	"testing"

	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/meta"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
)

func TestSetStatusConditionMovesTheTransitionTimeOnlyWithTheStatus(t *testing.T) {
	var conds []metav1.Condition
	t0 := metav1.Unix(1000, 0)
	if !meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Starting", LastTransitionTime: t0}) {
		t.Fatal("adding a condition reported no change")
	}
	if meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Starting"}) {
		t.Fatal("setting the same condition reported a change")
	}
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting"})
	if c := meta.FindStatusCondition(conds, "Ready"); c.Reason != "Waiting" || !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("a new reason: %+v", c)
	}
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Up"})
	if c := meta.FindStatusCondition(conds, "Ready"); c.LastTransitionTime.Equal(&t0) || !meta.IsStatusConditionTrue(conds, "Ready") || meta.IsStatusConditionFalse(conds, "Ready") {
		t.Fatalf("a new status: %+v", c)
	}
	if !meta.RemoveStatusCondition(&conds, "Ready") || meta.RemoveStatusCondition(&conds, "Ready") || len(conds) != 0 {
		t.Fatalf("remove: %+v", conds)
	}
}
