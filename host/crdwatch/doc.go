// Package crdwatch lets controllers follow their CRDs: a Watcher watches
// CustomResourceDefinitions (an informer, not polling) and knows which kinds are served now;
// Follow runs a runnable only while the kinds it needs are served, stopping it (and so
// releasing its informers) when a CRD goes and starting it again, afresh, when it returns.
package crdwatch
