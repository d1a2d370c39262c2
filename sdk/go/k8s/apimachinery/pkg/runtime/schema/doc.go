// Package schema names API groups, versions, kinds and resources, as
// k8s.io/apimachinery/pkg/runtime/schema does: each generated package's SchemeGroupVersion is a
// GroupVersion, and metav1.NewControllerRef takes a GroupVersionKind.
package schema
