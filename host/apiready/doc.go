// Package apiready follows the API server's own readiness (its /readyz): an API server whose
// etcd is gone still serves reads from its watch cache and keeps watches open, so informers see
// nothing wrong while every write fails. The Watcher says so in the log and the host's
// readiness, and says when it is over.
package apiready
