package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/internal/kinds"
)

// Policy is what one plugin may do.
type Policy struct {
	// Plugin is the plugin's name, for messages.
	Plugin string
	// Granted is what the operator granted (the plugin's config).
	Granted []abi.Permission
	// Asked is what the module's manifest asks for.
	Asked []abi.Permission
	// Namespaces bounds every namespaced read, write and watch; empty for all.
	Namespaces []string
	// Confined puts cluster-scoped kinds out of the plugin's reach: it works within Namespaces.
	Confined bool
}

// New returns the policy of a module whose manifest asks for asked, refusing one that asks for
// more than granted and naming each missing rule.
func New(plugin string, granted, asked []abi.Permission, namespaces []string) (*Policy, error) {
	p := &Policy{Plugin: plugin, Granted: granted, Asked: asked, Namespaces: slices.Clone(namespaces)}
	if missing := abi.Missing(granted, asked); len(missing) > 0 {
		return nil, fmt.Errorf("the module asks for permissions it was not granted: %s: grant %s in the plugin's permissions, or use a module that needs less", Join(missing), them(missing))
	}
	return p, nil
}

// Allows reports whether the plugin may do r: both asked for and granted.
func (p *Policy) Allows(r abi.Rule) bool {
	return abi.Allows(p.Asked, r.Group, r.Resource, r.Verb) && abi.Allows(p.Granted, r.Group, r.Resource, r.Verb)
}

// MayCall reports whether any resource of group allows verb: the check made on a call before
// its kind is looked up, so that a call outside the manifest never reaches discovery.
func (p *Policy) MayCall(group, verb string) bool {
	for _, ps := range [][]abi.Permission{p.Asked, p.Granted} {
		if !slices.ContainsFunc(ps, func(q abi.Permission) bool {
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

// Require refuses, naming each missing rule and whose (the manifest's or the grant's), unless
// the plugin may do every rule in rules. what says what needs them ("watching v1, Kind=Secret").
func (p *Policy) Require(what string, rules []abi.Rule) error {
	var notAsked, notGranted []abi.Rule
	for _, r := range rules {
		if !abi.Allows(p.Asked, r.Group, r.Resource, r.Verb) {
			notAsked = append(notAsked, r)
		}
		if !abi.Allows(p.Granted, r.Group, r.Resource, r.Verb) {
			notGranted = append(notGranted, r)
		}
	}
	var why []string // one line: messages go to logs and to guests
	if len(notAsked) > 0 {
		why = append(why, fmt.Sprintf("the module's manifest does not ask for %s: add %s to its permissions", Join(notAsked), them(notAsked)))
	}
	if len(notGranted) > 0 {
		why = append(why, fmt.Sprintf("plugin %q was not granted %s: grant %s in its permissions", p.Plugin, Join(notGranted), them(notGranted)))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%s needs %s: %s", what, Join(rules), strings.Join(why, "; and "))
}

func them(rs []abi.Rule) string {
	if len(rs) == 1 {
		return "it"
	}
	return "them"
}

// WatchRules are the rules an informer on resource needs: list and watch.
func WatchRules(resource schema.GroupResource) []abi.Rule {
	return []abi.Rule{{Group: resource.Group, Resource: resource.Resource, Verb: "list"}, {Group: resource.Group, Resource: resource.Resource, Verb: "watch"}}
}

// ReadRules are the rules a read call (get or list) on resource needs: the verb itself, and
// list and watch for the informer it is served from.
func ReadRules(verb string, resource schema.GroupResource) []abi.Rule {
	rules := WatchRules(resource)
	if verb != "list" {
		rules = append([]abi.Rule{{Group: resource.Group, Resource: resource.Resource, Verb: verb}}, rules...)
	}
	return rules
}

// Watched lists the kinds a manifest watches (for, owns, watches), each once, in that order.
func Watched(m *abi.Manifest) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, w := range append(append([]abi.Watch{m.For}, m.Owns...), m.Watches...) {
		gv, err := schema.ParseGroupVersion(w.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("apiVersion %q: %w", w.APIVersion, err)
		}
		if gvk := gv.WithKind(w.Kind); !slices.Contains(out, gvk) {
			out = append(out, gvk)
		}
	}
	return out, nil
}

// Mapper resolves kinds to resources: a RESTMapper.
type Mapper interface {
	RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
}

// CheckWatches requires list and watch for every kind m watches that mapper resolves, and
// returns the kinds it could not resolve (not served yet): they are checked when they are,
// before any informer is started for them. A kind of a built-in group that does not exist
// (ConfigMaps.v1) is refused, with the kind it most likely meant.
func (p *Policy) CheckWatches(m *abi.Manifest, mapper Mapper) (unresolved []schema.GroupVersionKind, err error) {
	watched, err := Watched(m)
	if err != nil {
		return nil, err
	}
	var refused []string // one line: messages go to logs, events and status
	for _, gvk := range watched {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			if kinds.BuiltInGroup(gvk.Group) && !kinds.Lookup(gvk).BuiltIn {
				// A kind the API server's own groups do not have is a mistake, not a CRD
				// still to come: waiting for it would wait for ever.
				refused = append(refused, fmt.Sprintf("watching %s: %s", Kind(gvk), kinds.NotBuiltIn(gvk)))
				continue
			}
			unresolved = append(unresolved, gvk)
			continue
		}
		if err := p.CheckWatch(gvk, mapping.Resource.GroupResource()); err != nil {
			refused = append(refused, err.Error())
		}
		if err := p.CheckScope(gvk, mapping.Scope.Name() == meta.RESTScopeNameNamespace); err != nil {
			refused = append(refused, "watching "+err.Error())
		}
	}
	if len(refused) > 0 {
		return unresolved, errors.New(strings.Join(refused, "; "))
	}
	return unresolved, nil
}

// CheckScope refuses a cluster-scoped kind to a confined plugin.
func (p *Policy) CheckScope(gvk schema.GroupVersionKind, namespaced bool) error {
	if p.Confined && !namespaced {
		return fmt.Errorf("%s is cluster-scoped, and plugin %q is confined to namespace %s: a namespaced Plugin reaches only its own namespace (a cluster admin may run it as a ClusterPlugin)", Kind(gvk), p.Plugin, strings.Join(p.Namespaces, ", "))
	}
	return nil
}

// CheckWatch requires list and watch on resource, the resource of kind gvk.
func (p *Policy) CheckWatch(gvk schema.GroupVersionKind, resource schema.GroupResource) error {
	return p.Require("watching "+Kind(gvk), WatchRules(resource))
}

// Kind spells a kind as wasmrec does everywhere: "Deployment.v1.apps".
func Kind(gvk schema.GroupVersionKind) string { return kinds.GVK(gvk) }

// Join spells rules as a list.
func Join(rs []abi.Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}
