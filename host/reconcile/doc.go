// Package reconcile defines the seam between the controller machinery and the code that makes
// the world right: Reconciler, its Request and Result, and terminal errors.
package reconcile
