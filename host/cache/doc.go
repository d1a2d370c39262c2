// Package cache keeps one shared informer per GroupVersionKind for every controller in a host.
// An informer starts on first use, is shared by reference count, and stops when the last user
// releases it. It drops managedFields from what it stores, and a sync that takes longer than the
// timeout fails with the GVK named. Reconcilers read from here, not from the API server.
package cache
