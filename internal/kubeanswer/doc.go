// Package kubeanswer reads the objects in a host call's answer, as a recording holds it: JSON, or
// for a built-in kind a guest asked for in protobuf, the Kubernetes protobuf envelope, decoded
// to the JSON form the API server would have sent.
package kubeanswer
