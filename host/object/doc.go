// Package object is how the host holds an API object whose schema it does not know: the
// metadata that handlers, predicates and indexes read, decoded, beside the object's JSON as the
// API server sent it, which is what a guest is handed. Nothing in the host reads the rest of the
// object, so nothing decodes it: a guest's get is a copy of bytes, not a decode into maps and a
// re-encode (see RATIONALE.md, "Objects are kept as the API server's bytes").
package object
