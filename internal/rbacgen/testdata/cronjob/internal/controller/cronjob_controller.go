// Package controller holds the reconcile, with the RBAC markers kubebuilder's CronJob tutorial
// writes above it.
package controller

import (
	"context"

	wasmrec "github.com/wasmrec/wasmrec/sdk/go"
)

// +kubebuilder:rbac:groups=batch.tutorial.kubebuilder.io,resources=cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch.tutorial.kubebuilder.io,resources=cronjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch.tutorial.kubebuilder.io,resources=cronjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=get

// Reconcile does nothing: the markers are what is tested.
func Reconcile(ctx context.Context, req wasmrec.Request) (wasmrec.Result, error) {
	return wasmrec.Result{}, nil
}

// Markers in other forms: braces, core for "", "*" for every verb, what a plugin never uses.
//+kubebuilder:rbac:groups=core,resources={pods},verbs={get,list}
// +kubebuilder:rbac:groups="",resources=pods,verbs=watch;deletecollection,namespace=team-a
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=*,roleName=apps-admin
// +kubebuilder:rbac:urls=/metrics,verbs=get
