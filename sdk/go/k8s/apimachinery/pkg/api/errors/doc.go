// Package errors tells the API server's refusals apart, under the name Kubernetes code imports
// them by (k8s.io/apimachinery/pkg/api/errors, usually as apierrors): IsNotFound,
// IsAlreadyExists, IsConflict... of an error the plugin's client returned. They are package
// wasmrec's, which the host's answers carry.
package errors
