// Package reference makes an ObjectReference to an object, as
// k8s.io/client-go/tools/reference does, for typed objects: what a status's list of active
// children or an Event's involved object holds.
package reference
