package controllerutil

import (
	"encoding/json"
	"time"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// ConditionStatus is a condition's status: ConditionTrue, ConditionFalse or ConditionUnknown.
type ConditionStatus string

// Condition statuses, as metav1 spells them.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one of an object's status.conditions, metav1.Condition's fields. In the object
// it is a map with the JSON names (type, status, observedGeneration, lastTransitionTime,
// reason, message), lastTransitionTime in RFC 3339 to the second, as the API server keeps it.
type Condition struct {
	// Type names the condition, in CamelCase ("Ready"); an object has one of each type.
	Type   string
	Status ConditionStatus
	// ObservedGeneration is the metadata.generation the condition was set from (0: left out).
	ObservedGeneration int64
	// LastTransitionTime is when Status last changed. SetStatusCondition sets it to now when it
	// is zero; set it to pin the time (in a test, say).
	LastTransitionTime time.Time
	// Reason is a CamelCase word for the last transition ("ChildrenApplied").
	Reason string
	// Message says what happened, for people.
	Message string
}

// SetStatusCondition sets the condition of c's type in object's status.conditions to c, as
// apimachinery's meta.SetStatusCondition does, and reports whether anything changed:
//
//   - No condition of the type: c is appended, its LastTransitionTime now if zero.
//   - One (the first of the type, if several): its status, reason, message and
//     observedGeneration become c's, and its lastTransitionTime moves, to c's LastTransitionTime
//     or to now if zero, only when its status changes. The condition keeps its place in the
//     list, and any other fields it has.
//
// status and status.conditions are made if missing; a status.conditions that is not a list is
// replaced. It does nothing, and reports false, if status is there but not an object.
func SetStatusCondition(object *wasmrec.Object, c Condition) (changed bool) {
	return setStatusCondition(object, c, time.Now)
}

func setStatusCondition(object *wasmrec.Object, c Condition, now func() time.Time) (changed bool) {
	conds, _ := object.NestedSlice("status", "conditions")
	for _, item := range conds {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != c.Type {
			continue
		}
		old := decodeCondition(m)
		if old.Status != c.Status {
			m["status"] = string(c.Status)
			t := c.LastTransitionTime
			if t.IsZero() {
				t = now()
			}
			m["lastTransitionTime"] = formatTime(t)
			changed = true
		}
		if old.Reason != c.Reason {
			m["reason"] = c.Reason
			changed = true
		}
		if old.Message != c.Message {
			m["message"] = c.Message
			changed = true
		}
		if old.ObservedGeneration != c.ObservedGeneration {
			if c.ObservedGeneration == 0 {
				delete(m, "observedGeneration")
			} else {
				m["observedGeneration"] = c.ObservedGeneration
			}
			changed = true
		}
		return changed
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = now()
	}
	return object.SetNested(append(conds[:len(conds):len(conds)], encodeCondition(c)), "status", "conditions") == nil
}

// FindStatusCondition returns a copy of the condition of a type in object's status.conditions
// (the first, if several), or nil. Change it with SetStatusCondition.
func FindStatusCondition(object *wasmrec.Object, conditionType string) *Condition {
	conds, _ := object.NestedSlice("status", "conditions")
	for _, item := range conds {
		if m, ok := item.(map[string]any); ok && m["type"] == conditionType {
			c := decodeCondition(m)
			return &c
		}
	}
	return nil
}

// RemoveStatusCondition removes the conditions of a type from object's status.conditions, and
// reports whether there was one.
func RemoveStatusCondition(object *wasmrec.Object, conditionType string) (removed bool) {
	conds, _ := object.NestedSlice("status", "conditions")
	kept := make([]any, 0, len(conds))
	for _, item := range conds {
		if m, ok := item.(map[string]any); ok && m["type"] == conditionType {
			continue
		}
		kept = append(kept, item)
	}
	if len(kept) == len(conds) {
		return false
	}
	return object.SetNested(kept, "status", "conditions") == nil
}

// IsStatusConditionTrue reports whether object has a condition of the type and it is True.
func IsStatusConditionTrue(object *wasmrec.Object, conditionType string) bool {
	return IsStatusConditionPresentAndEqual(object, conditionType, ConditionTrue)
}

// IsStatusConditionFalse reports whether object has a condition of the type and it is False.
func IsStatusConditionFalse(object *wasmrec.Object, conditionType string) bool {
	return IsStatusConditionPresentAndEqual(object, conditionType, ConditionFalse)
}

// IsStatusConditionPresentAndEqual reports whether object has a condition of the type (the
// first, if several) and its status is status.
func IsStatusConditionPresentAndEqual(object *wasmrec.Object, conditionType string, status ConditionStatus) bool {
	c := FindStatusCondition(object, conditionType)
	return c != nil && c.Status == status
}

func decodeCondition(m map[string]any) Condition {
	str := func(k string) string { s, _ := m[k].(string); return s }
	c := Condition{Type: str("type"), Status: ConditionStatus(str("status")), Reason: str("reason"), Message: str("message")}
	switch n := m["observedGeneration"].(type) {
	case float64:
		c.ObservedGeneration = int64(n)
	case int64:
		c.ObservedGeneration = n
	case int:
		c.ObservedGeneration = int64(n)
	case json.Number:
		c.ObservedGeneration, _ = n.Int64()
	}
	c.LastTransitionTime, _ = time.Parse(time.RFC3339, str("lastTransitionTime"))
	return c
}

func encodeCondition(c Condition) map[string]any {
	m := map[string]any{
		"type": c.Type, "status": string(c.Status), "lastTransitionTime": formatTime(c.LastTransitionTime),
		"reason": c.Reason, "message": c.Message,
	}
	if c.ObservedGeneration != 0 {
		m["observedGeneration"] = c.ObservedGeneration
	}
	return m
}

// formatTime writes a time as metav1.Time does: RFC 3339 in UTC, to the second.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
