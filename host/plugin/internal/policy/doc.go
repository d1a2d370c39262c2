// Package policy decides what one plugin may do. It is the one place the host checks a
// plugin's rights: at load, at every swap, before an informer is started for the plugin, and on
// every host call, before anything touches discovery or the API server.
//
// A plugin may do what both its manifest asks for and its operator granted, in the namespaces
// it was given (all, if none). Watching a kind (for, owns, watches) needs list and watch on it;
// so does reading it, since reads come from an informer that lists and watches the kind. Those
// rules and their messages are abi.Policy's, which the Go SDK's fake cluster checks calls with
// too; this package adds what needs the API server's kinds (the kinds a manifest watches, their
// scope, a confined plugin).
package policy
