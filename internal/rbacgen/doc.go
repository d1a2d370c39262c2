// Package rbacgen reads the kubebuilder RBAC markers of a Go plugin's module
// (+kubebuilder:rbac:groups=...,resources=...,verbs=...) and writes the permissions they ask for
// into the plugin's main package, as a call of wasmrec.AddPermissions: a controller ported from
// kubebuilder asks the host for what its markers say, as controller-gen's role.yaml asked the
// cluster.
//
// The markers' permissions are what the plugin asks for; what it gets is still what its
// operator grants. What a plugin's permissions cannot carry (non-resource URLs, resource names,
// a namespace, verbs it never calls) is warned of at the marker's file and line; a marker that
// cannot be read stops the build there.
package rbacgen
