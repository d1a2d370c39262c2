package meta

import (
	"time"

	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
)

// SetStatusCondition sets newCondition in conditions: added if its type is new, else the
// existing one updated, its lastTransitionTime changed only when its status changes (to
// newCondition's, or now if that is zero). It reports whether conditions changed.
func SetStatusCondition(conditions *[]metav1.Condition, newCondition metav1.Condition) (changed bool) {
	if conditions == nil {
		return false
	}
	existing := FindStatusCondition(*conditions, newCondition.Type)
	if existing == nil {
		if newCondition.LastTransitionTime.IsZero() {
			newCondition.LastTransitionTime = metav1.NewTime(time.Now())
		}
		*conditions = append(*conditions, newCondition)
		return true
	}
	if existing.Status != newCondition.Status {
		existing.Status = newCondition.Status
		if !newCondition.LastTransitionTime.IsZero() {
			existing.LastTransitionTime = newCondition.LastTransitionTime
		} else {
			existing.LastTransitionTime = metav1.NewTime(time.Now())
		}
		changed = true
	}
	if existing.Reason != newCondition.Reason {
		existing.Reason = newCondition.Reason
		changed = true
	}
	if existing.Message != newCondition.Message {
		existing.Message = newCondition.Message
		changed = true
	}
	if existing.ObservedGeneration != newCondition.ObservedGeneration {
		existing.ObservedGeneration = newCondition.ObservedGeneration
		changed = true
	}
	return changed
}

// RemoveStatusCondition removes the condition of conditionType, and reports whether there was
// one.
func RemoveStatusCondition(conditions *[]metav1.Condition, conditionType string) (removed bool) {
	if conditions == nil || len(*conditions) == 0 {
		return false
	}
	kept := make([]metav1.Condition, 0, len(*conditions))
	for _, c := range *conditions {
		if c.Type != conditionType {
			kept = append(kept, c)
		}
	}
	removed = len(*conditions) != len(kept)
	*conditions = kept
	return removed
}

// FindStatusCondition is the condition of conditionType in conditions, or nil.
func FindStatusCondition(conditions []metav1.Condition, conditionType string) *metav1.Condition {
	for i := range conditions {
		if conditions[i].Type == conditionType {
			return &conditions[i]
		}
	}
	return nil
}

// IsStatusConditionTrue reports a condition of conditionType with status True.
func IsStatusConditionTrue(conditions []metav1.Condition, conditionType string) bool {
	return IsStatusConditionPresentAndEqual(conditions, conditionType, metav1.ConditionTrue)
}

// IsStatusConditionFalse reports a condition of conditionType with status False.
func IsStatusConditionFalse(conditions []metav1.Condition, conditionType string) bool {
	return IsStatusConditionPresentAndEqual(conditions, conditionType, metav1.ConditionFalse)
}

// IsStatusConditionPresentAndEqual reports a condition of conditionType with status status.
func IsStatusConditionPresentAndEqual(conditions []metav1.Condition, conditionType string, status metav1.ConditionStatus) bool {
	for _, c := range conditions {
		if c.Type == conditionType {
			return c.Status == status
		}
	}
	return false
}
