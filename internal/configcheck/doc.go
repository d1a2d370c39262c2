// Package configcheck explains why a YAML file does not decode into a Go type, for a person
// to fix it: each mistake with its line, the path of the field ("plugins[0] (app).timeout"), the
// value found, and the form the field takes, with a "did you mean" for a misspelt field. The
// decoders (sigs.k8s.io/yaml, encoding/json) stop at the first mistake and name Go types; this
// walks the YAML node tree (go.yaml.in/yaml/v3, which keeps lines) against the type's JSON
// fields instead, and finds them all.
package configcheck
