package abi

import (
	"fmt"
	"slices"
	"strings"
)

// Policy is what one plugin may do (ABI.md, "Permissions"): what both its manifest asks for and
// its operator granted, in the namespaces it was given (all, if none). The host checks every
// call against it, and so does the Go SDK's fake cluster, with the same rules and messages.
type Policy struct {
	// Plugin is the plugin's name, for messages.
	Plugin string
	// Granted is what the operator granted (the plugin's config).
	Granted []Permission
	// Asked is what the module's manifest asks for.
	Asked []Permission
	// Namespaces bounds every namespaced call; empty for all.
	Namespaces []string
}

// NewPolicy returns the policy of a module whose manifest asks for asked, refusing one that
// asks for more than granted and naming each missing rule.
func NewPolicy(plugin string, granted, asked []Permission, namespaces []string) (*Policy, error) {
	if missing := Missing(granted, asked); len(missing) > 0 {
		return nil, fmt.Errorf("the module asks for permissions it was not granted: %s: grant %s in the plugin's permissions, or use a module that needs less", JoinRules(missing), them(missing))
	}
	return &Policy{Plugin: plugin, Granted: granted, Asked: asked, Namespaces: slices.Clone(namespaces)}, nil
}

// Allows reports whether the plugin may do r: both asked for and granted.
func (p *Policy) Allows(r Rule) bool {
	return Allows(p.Asked, r.Group, r.Resource, r.Verb) && Allows(p.Granted, r.Group, r.Resource, r.Verb)
}

// MayCall reports whether any resource of group allows verb, in both the manifest and the grant:
// the check made on a call before its kind is looked up, so that a call outside the manifest
// never costs a lookup.
func (p *Policy) MayCall(group, verb string) bool {
	for _, ps := range [][]Permission{p.Asked, p.Granted} {
		if !slices.ContainsFunc(ps, func(q Permission) bool {
			return q.Group == group && (slices.Contains(q.Verbs, verb) || slices.Contains(q.Verbs, "*"))
		}) {
			return false
		}
	}
	return true
}

// InNamespace reports whether a namespaced object in ns is within the plugin's namespaces.
func (p *Policy) InNamespace(ns string) bool {
	return len(p.Namespaces) == 0 || slices.Contains(p.Namespaces, ns)
}

// CheckCall is the check of an object call before its kind is looked up: some rule of group
// allows verb (MayCall), and namespace, if set, is one of the plugin's. kind spells the kind
// for the message ("Deployment.v1.apps"); the error is the reason for forbidden (4).
func (p *Policy) CheckCall(verb, group, kind, namespace string) error {
	if !p.MayCall(group, verb) {
		return fmt.Errorf("%s %s: plugin %q may %s nothing in API group %s (no such rule is both asked for in its manifest and granted)", verb, kind, p.Plugin, verb, Rule{Group: group}.GroupName())
	}
	if namespace != "" && !p.InNamespace(namespace) {
		return fmt.Errorf("namespace %q is outside plugin %q's namespaces %v", namespace, p.Plugin, p.Namespaces)
	}
	return nil
}

// Require refuses, naming each missing rule and whose (the manifest's or the grant's), unless
// the plugin may do every rule in rules. what says what needs them ("watching Secret.v1").
func (p *Policy) Require(what string, rules []Rule) error {
	var notAsked, notGranted []Rule
	for _, r := range rules {
		if !Allows(p.Asked, r.Group, r.Resource, r.Verb) {
			notAsked = append(notAsked, r)
		}
		if !Allows(p.Granted, r.Group, r.Resource, r.Verb) {
			notGranted = append(notGranted, r)
		}
	}
	var why []string // one line: messages go to logs and to guests
	if len(notAsked) > 0 {
		why = append(why, fmt.Sprintf("the module's manifest does not ask for %s: add %s to its permissions", JoinRules(notAsked), them(notAsked)))
	}
	if len(notGranted) > 0 {
		why = append(why, fmt.Sprintf("plugin %q was not granted %s: grant %s in its permissions", p.Plugin, JoinRules(notGranted), them(notGranted)))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%s needs %s: %s", what, JoinRules(rules), strings.Join(why, "; and "))
}

// WatchRules are the rules watching resource of group needs: list and watch.
func WatchRules(group, resource string) []Rule {
	return []Rule{{Group: group, Resource: resource, Verb: "list"}, {Group: group, Resource: resource, Verb: "watch"}}
}

// CallRules are the rules a call of verb on resource of group needs (ABI.md's table): verb on
// resource, or on its subresource sub if set; a read (get, list) also needs list and watch,
// since reads are served from an informer.
func CallRules(verb, group, resource, sub string) []Rule {
	switch {
	case sub != "":
		return []Rule{{Group: group, Resource: resource + "/" + sub, Verb: verb}}
	case verb == "list":
		return WatchRules(group, resource)
	case verb == "get":
		return append([]Rule{{Group: group, Resource: resource, Verb: verb}}, WatchRules(group, resource)...)
	}
	return []Rule{{Group: group, Resource: resource, Verb: verb}}
}

// JoinRules spells rules as a list: "get core/configmaps, list core/configmaps".
func JoinRules(rs []Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

func them(rs []Rule) string {
	if len(rs) == 1 {
		return "it"
	}
	return "them"
}
