package fake

import (
	"fmt"
	"strings"

	"github.com/wasmrec/wasmrec/abi"
)

// This file is the host's check of a call: abi.Policy, which the host's policy is built on, in
// the order of the target check of host/plugin/internal/hostcalls, on the manifest and the grant the
// Cluster holds.

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

// policy is the plugin's abi.Policy, the host's own: the manifest's permissions, the grant and
// the namespaces the Cluster holds.
func (c *Cluster) policy() *abi.Policy {
	return &abi.Policy{Plugin: c.name, Granted: c.grant, Asked: c.manifest.Permissions, Namespaces: c.namespaces}
}

// target is the host's check of an object call, in its order: apiVersion and kind; group and
// verb; the namespace against the plugin's; the kind lookup; the exact rules; the namespace
// against the kind's scope.
func (c *Cluster) target(apiVersion, kind, sub, verb, namespace string) (kindInfo, error) {
	group, version, ok := groupVersion(apiVersion)
	if !ok || kind == "" {
		return kindInfo{}, fail(abi.StatusBadRequest, "apiVersion %q and kind %q do not name a kind", apiVersion, kind)
	}
	name, pol := kindName(group, version, kind), c.policy()
	if err := pol.CheckCall(verb, group, name, namespace); err != nil {
		return kindInfo{}, fail(abi.StatusForbidden, "forbidden: %v", err)
	}
	k, ok := c.lookupKind(group, kind)
	if !ok {
		return kindInfo{}, fail(abi.StatusBadRequest, "no resource serves %s: is its CRD installed? (check apiVersion and kind: Kind is singular, as in manifests)", name)
	}
	if err := pol.Require(verb+" "+name, abi.CallRules(verb, group, k.resource, sub)); err != nil {
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
	pol, err := abi.NewPolicy(c.name, c.grant, c.manifest.Permissions, c.namespaces)
	if err != nil {
		return err
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
		if err := pol.Require("watching "+kindName(group, version, w.Kind), abi.WatchRules(group, k.resource)); err != nil {
			refused = append(refused, err.Error())
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s", strings.Join(refused, "; "))
	}
	return nil
}
