//go:build !wasip1

package controller

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
