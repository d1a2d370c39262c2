package fake

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
)

// This file is the host's permission check (host/plugin/internal/policy and the target check of
// host/plugin/internal/guest), on the manifest and the grant the Cluster holds.

// apiError is a call's failure: a status and the message the host would send.
type apiError struct {
	status abi.Status
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func fail(s abi.Status, format string, args ...any) error {
	return &apiError{status: s, msg: fmt.Sprintf(format, args...)}
}

// groupVersion is schema.ParseGroupVersion: "" and "/" are the empty group and version, "v1" the
// core group, "g/v" a group; more slashes are an error.
func groupVersion(apiVersion string) (group, version string, ok bool) {
	if apiVersion == "" || apiVersion == "/" {
		return "", "", true
	}
	switch strings.Count(apiVersion, "/") {
	case 0:
		return "", apiVersion, true
	case 1:
		g, v, _ := strings.Cut(apiVersion, "/")
		return g, v, true
	}
	return "", "", false
}

// kindName spells a kind as the host's messages do: "ConfigMap.v1", "Deployment.v1.apps".
func kindName(group, version, kind string) string {
	s := kind + "." + version
	if group != "" {
		s += "." + group
	}
	return s
}

// allows is abi.Allows on both the manifest's permissions and the grant.
func (c *Cluster) allows(r abi.Rule) bool {
	return abi.Allows(c.manifest.Permissions, r.Group, r.Resource, r.Verb) && abi.Allows(c.grant, r.Group, r.Resource, r.Verb)
}

// mayCall is the host's check before any lookup: some rule of group allows verb, in both.
func (c *Cluster) mayCall(group, verb string) bool {
	for _, ps := range [][]abi.Permission{c.manifest.Permissions, c.grant} {
		if !slices.ContainsFunc(ps, func(q abi.Permission) bool {
			return q.Group == group && (slices.Contains(q.Verbs, verb) || slices.Contains(q.Verbs, "*"))
		}) {
			return false
		}
	}
	return true
}

func (c *Cluster) inNamespace(ns string) bool {
	return len(c.namespaces) == 0 || slices.Contains(c.namespaces, ns)
}

// require refuses, naming each missing rule and whose, unless both allow every rule.
func (c *Cluster) require(what string, rules []abi.Rule) error {
	var notAsked, notGranted []abi.Rule
	for _, r := range rules {
		if !abi.Allows(c.manifest.Permissions, r.Group, r.Resource, r.Verb) {
			notAsked = append(notAsked, r)
		}
		if !abi.Allows(c.grant, r.Group, r.Resource, r.Verb) {
			notGranted = append(notGranted, r)
		}
	}
	var why []string
	if len(notAsked) > 0 {
		why = append(why, fmt.Sprintf("the module's manifest does not ask for %s: add %s to its permissions", joinRules(notAsked), them(notAsked)))
	}
	if len(notGranted) > 0 {
		why = append(why, fmt.Sprintf("plugin %q was not granted %s: grant %s in its permissions", c.name, joinRules(notGranted), them(notGranted)))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%s needs %s: %s", what, joinRules(rules), strings.Join(why, "; and "))
}

func joinRules(rs []abi.Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// readRules are the rules a read needs: the verb, and list and watch for the informer.
func readRules(verb, group, resource string) []abi.Rule {
	rules := []abi.Rule{{Group: group, Resource: resource, Verb: "list"}, {Group: group, Resource: resource, Verb: "watch"}}
	if verb != "list" {
		rules = append([]abi.Rule{{Group: group, Resource: resource, Verb: verb}}, rules...)
	}
	return rules
}

// target is the host's check of an object call, in its order: apiVersion and kind; group and
// verb; the namespace against the plugin's; the kind lookup; the exact rules; the namespace
// against the kind's scope.
func (c *Cluster) target(apiVersion, kind, sub, verb, namespace string) (kindInfo, error) {
	group, version, ok := groupVersion(apiVersion)
	if !ok || kind == "" {
		return kindInfo{}, fail(abi.StatusBadRequest, "apiVersion %q and kind %q do not name a kind", apiVersion, kind)
	}
	name := kindName(group, version, kind)
	if !c.mayCall(group, verb) {
		return kindInfo{}, fail(abi.StatusForbidden, "forbidden: %s %s: plugin %q may %s nothing in API group %s (no such rule is both asked for in its manifest and granted)",
			verb, name, c.name, verb, abi.Rule{Group: group}.GroupName())
	}
	if namespace != "" && !c.inNamespace(namespace) {
		return kindInfo{}, fail(abi.StatusForbidden, "forbidden: namespace %q is outside plugin %q's namespaces %v", namespace, c.name, c.namespaces)
	}
	k, ok := c.lookupKind(group, kind)
	if !ok {
		return kindInfo{}, fail(abi.StatusBadRequest, "no resource serves %s: is its CRD installed? (check apiVersion and kind: Kind is singular, as in manifests)", name)
	}
	rules := []abi.Rule{{Group: group, Resource: k.resource, Verb: verb}}
	if sub != "" {
		rules[0].Resource += "/" + sub
	} else if verb == "get" || verb == "list" {
		rules = readRules(verb, group, k.resource)
	}
	if err := c.require(verb+" "+name, rules); err != nil {
		return kindInfo{}, fail(abi.StatusForbidden, "forbidden: %v", err)
	}
	switch {
	case !k.namespaced && namespace != "":
		return kindInfo{}, fail(abi.StatusBadRequest, "%s is cluster-scoped: leave namespace empty (it is %q)", name, namespace)
	case k.namespaced && namespace == "" && verb != "list":
		return kindInfo{}, fail(abi.StatusBadRequest, "%s is namespaced: give the object's namespace", name)
	}
	return k, nil
}

// checkManifest is what the host checks when it loads the module: the manifest asks for no more
// than the grant, and every watched kind (for, owns, watches) has list and watch in both.
func (c *Cluster) checkManifest() error {
	if missing := abi.Missing(c.grant, c.manifest.Permissions); len(missing) > 0 {
		return fmt.Errorf("the module asks for permissions it was not granted: %s: grant %s in the plugin's permissions, or use a module that needs less", joinRules(missing), them(missing))
	}
	var refused []string
	seen := map[string]bool{}
	for _, w := range append(append([]abi.Watch{c.manifest.For}, c.manifest.Owns...), c.manifest.Watches...) {
		group, version, ok := groupVersion(w.APIVersion)
		if !ok {
			return fmt.Errorf("apiVersion %q: unexpected GroupVersion string: %v", w.APIVersion, w.APIVersion)
		}
		if seen[group+"/"+w.Kind] {
			continue
		}
		seen[group+"/"+w.Kind] = true
		k, ok := c.lookupKind(group, w.Kind)
		if !ok {
			// A kind the API server's own groups do not have is a mistake, not a CRD to come.
			refused = append(refused, fmt.Sprintf("watching %s: %s", kindName(group, version, w.Kind), notBuiltIn(group, version, w.Kind)))
			continue
		}
		rules := readRules("list", group, k.resource)
		if err := c.require("watching "+kindName(group, version, w.Kind), rules); err != nil {
			refused = append(refused, err.Error())
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s", strings.Join(refused, "; "))
	}
	return nil
}

// them is "it" for one rule, "them" for more, as the host words it.
func them(rs []abi.Rule) string {
	if len(rs) == 1 {
		return "it"
	}
	return "them"
}
