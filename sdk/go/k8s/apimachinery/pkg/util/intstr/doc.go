// Package intstr holds IntOrString, a field that takes an integer or a string (a port number
// or name, a count or a percentage), as k8s.io/apimachinery/pkg/util/intstr does.
package intstr
