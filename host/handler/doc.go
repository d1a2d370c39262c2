// Package handler turns informer events into reconcile Requests on a controller's queue: For
// (the object's own key), Owns (the key of the object's owner) and a mapping function (any keys).
// The shapes follow controller-runtime's handler package.
package handler
