// Package controller runs a Reconciler behind a rate-limited work queue: sources enqueue
// Requests, MaxConcurrentReconciles workers take them (one key is never reconciled twice at
// once), and each Result or error is applied to the queue exactly as the Result table of
// docs/plugin-authors.md says.
package controller
