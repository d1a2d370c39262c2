// Package modsource is where a plugin's module comes from and how a new one is noticed: it reads
// modules from files and OCI registries (or image layouts), follows a module file through one
// host-wide file watcher, polls a registry tag, and swaps the plugin when either moves. A source
// that cannot be read leaves the running module serving; registry failures back off (see
// package backoff).
package modsource
