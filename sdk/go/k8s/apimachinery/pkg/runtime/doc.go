// Package runtime holds what k8s.io/apimachinery/pkg/runtime gives the Kubernetes types:
// Object, which every kind is, and RawExtension, a field that holds any object as JSON.
package runtime
