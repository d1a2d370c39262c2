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

// Policy is what one plugin may do: abi.Policy (the manifest, the grant, the namespaces, and
// the checks of every call, which the Go SDK's fake cluster shares), and what only the host
// knows of.
type Policy struct {
	abi.Policy
	confined bool // cluster-scoped kinds are out of the plugin's reach
}

// New returns the policy of a module whose manifest asks for asked, refusing one that asks for
// more than granted and naming each missing rule. A confined plugin has cluster-scoped kinds
// out of its reach: it works within namespaces.
func New(plugin string, granted, asked []abi.Permission, namespaces []string, confined bool) (*Policy, error) {
	p, err := abi.NewPolicy(plugin, granted, asked, namespaces)
	if err != nil {
		return nil, err
	}
	return &Policy{Policy: *p, confined: confined}, nil
}

// WatchRules are the rules an informer on resource needs: list and watch.
func WatchRules(resource schema.GroupResource) []abi.Rule {
	return abi.WatchRules(resource.Group, resource.Resource)
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
	if p.confined && !namespaced {
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
