// Package meta holds apimachinery's status-condition helpers (k8s.io/apimachinery/pkg/api/meta)
// for the generated metav1.Condition: SetStatusCondition, FindStatusCondition,
// RemoveStatusCondition, IsStatusConditionTrue, IsStatusConditionFalse and
// IsStatusConditionPresentAndEqual, with apimachinery's rules (lastTransitionTime moves only
// when the status does).
package meta
