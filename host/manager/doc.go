// Package manager runs a host's runnables in groups, as controller-runtime's manager does:
// HTTP servers, then caches (started and synced), then other runnables, then those that need
// leader election (controllers). It stops them in reverse order within a graceful-shutdown
// timeout. Runnables can be added and removed while it runs.
package manager
