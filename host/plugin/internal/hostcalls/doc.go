// Package hostcalls is the host's side of a guest's host calls: its reads from the host's
// informers, its writes and events through the API server, each checked first against the
// plugin's permission policy (see package policy) and then paced by the plugin's own rate limits.
// A call the policy refuses touches neither discovery nor the API server.
package hostcalls
