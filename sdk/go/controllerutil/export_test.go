package controllerutil

// SetStatusConditionAt is SetStatusCondition with now as the clock.
var SetStatusConditionAt = setStatusCondition
