// Package source feeds a controller's queue: Kind watches a kind through the host's shared
// informer cache, Informer watches an informer the caller owns. Events pass the predicates and
// the handler turns them into Requests.
package source
