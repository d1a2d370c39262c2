package abi

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Manifest is what a plugin says about itself: what it reconciles, what it watches and the
// permissions it asks for. The plugin returns it as JSON from the manifest export.
type Manifest struct {
	// Name is the plugin's own name for itself; the operator's config may rename it.
	Name string `json:"name,omitempty"`
	// For is the kind reconciled: each Request names one of its objects.
	For Watch `json:"for"`
	// Owns are kinds whose objects' controller owner, of the For kind, is reconciled.
	Owns []Watch `json:"owns,omitempty"`
	// Watches are other kinds mapped to For objects by Map.
	Watches []Watch `json:"watches,omitempty"`
	// Permissions the plugin needs. Watching a kind needs list and watch on it.
	Permissions []Permission `json:"permissions,omitempty"`
}

// Watch is a kind to watch, with its predicates.
type Watch struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Map (Watches only) says which For objects an event enqueues: MapSameName, MapNamespace or
	// MapFunc.
	Map        string      `json:"map,omitempty"`
	Predicates []Predicate `json:"predicates,omitempty"`
}

// Watch mappings.
const (
	// MapSameName enqueues the For object with the watched object's namespace and name.
	MapSameName = "sameName"
	// MapNamespace enqueues every For object in the watched object's namespace.
	MapNamespace = "namespace"
	// MapFunc enqueues what the plugin's map export (ExportMap) returns for the object.
	MapFunc = "func"
)

// MapsInGuest reports whether a watch of m is mapped by the plugin's map export.
func (m *Manifest) MapsInGuest() bool {
	return slices.ContainsFunc(m.Watches, func(w Watch) bool { return w.Map == MapFunc })
}

// Predicate filters events. Type is one of the Predicate* constants; the other fields belong to
// the types that take them.
type Predicate struct {
	Type       string         `json:"type"`
	Selector   *LabelSelector `json:"selector,omitempty"`   // LabelSelector
	Namespaces []string       `json:"namespaces,omitempty"` // Namespace
	Predicates []Predicate    `json:"predicates,omitempty"` // And, Or; Not takes exactly one
}

// Predicate types.
const (
	PredicateGenerationChanged      = "GenerationChanged"
	PredicateResourceVersionChanged = "ResourceVersionChanged"
	PredicateAnnotationChanged      = "AnnotationChanged"
	PredicateLabelChanged           = "LabelChanged"
	PredicateLabelSelector          = "LabelSelector"
	PredicateNamespace              = "Namespace"
	PredicateAnd                    = "And"
	PredicateOr                     = "Or"
	PredicateNot                    = "Not"
)

// LabelSelector is metav1.LabelSelector's JSON shape.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is metav1.LabelSelectorRequirement's JSON shape.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Permission grants verbs on resources of one API group, as an RBAC rule does. Resources are
// plural names ("deployments"); "deployments/status" is their status subresource.
type Permission struct {
	Group     string   `json:"group"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

// Verbs a permission may name.
var Verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// MaxManifest bounds the manifest's size.
const MaxManifest = 1 << 20

// DecodeManifest parses and validates a manifest.
func DecodeManifest(b []byte) (*Manifest, error) {
	if len(b) > MaxManifest {
		return nil, fmt.Errorf("manifest of %d bytes exceeds %d", len(b), MaxManifest)
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest is not valid JSON for ABI v%d: %w", Version, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest's shape (not whether its kinds exist: the host does that).
func (m *Manifest) Validate() error {
	var errs []error
	if err := m.For.validate("for", false); err != nil {
		errs = append(errs, err)
	}
	for i, w := range m.Owns {
		if err := w.validate(fmt.Sprintf("owns[%d]", i), false); err != nil {
			errs = append(errs, err)
		}
	}
	for i, w := range m.Watches {
		if err := w.validate(fmt.Sprintf("watches[%d]", i), true); err != nil {
			errs = append(errs, err)
		}
	}
	for i, p := range m.Permissions {
		where := fmt.Sprintf("permissions[%d]", i)
		if len(p.Resources) == 0 {
			errs = append(errs, fmt.Errorf("%s: no resources", where))
		}
		if len(p.Verbs) == 0 {
			errs = append(errs, fmt.Errorf("%s: no verbs", where))
		}
		for _, v := range p.Verbs {
			if !slices.Contains(Verbs, v) {
				errs = append(errs, fmt.Errorf("%s: unknown verb %q (known: %s)", where, v, strings.Join(Verbs, ", ")))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid manifest: %w", errors.Join(errs...))
	}
	return nil
}

func (w Watch) validate(where string, isWatches bool) error {
	var errs []error
	if w.APIVersion == "" || w.Kind == "" {
		errs = append(errs, fmt.Errorf("%s: apiVersion and kind are required", where))
	}
	switch {
	case isWatches && w.Map != MapSameName && w.Map != MapNamespace && w.Map != MapFunc:
		errs = append(errs, fmt.Errorf("%s: map must be %q, %q or %q, not %q", where, MapSameName, MapNamespace, MapFunc, w.Map))
	case !isWatches && w.Map != "":
		errs = append(errs, fmt.Errorf("%s: map applies to watches only", where))
	}
	for i, p := range w.Predicates {
		if err := p.validate(fmt.Sprintf("%s.predicates[%d]", where, i), 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p Predicate) validate(where string, depth int) error {
	if depth > 16 {
		return fmt.Errorf("%s: predicates nested deeper than 16", where)
	}
	switch p.Type {
	case PredicateGenerationChanged, PredicateResourceVersionChanged, PredicateAnnotationChanged, PredicateLabelChanged:
		return nil
	case PredicateLabelSelector:
		if p.Selector == nil {
			return fmt.Errorf("%s: LabelSelector needs a selector", where)
		}
		return nil
	case PredicateNamespace:
		if len(p.Namespaces) == 0 {
			return fmt.Errorf("%s: Namespace needs namespaces", where)
		}
		return nil
	case PredicateAnd, PredicateOr, PredicateNot:
		if p.Type == PredicateNot && len(p.Predicates) != 1 {
			return fmt.Errorf("%s: Not takes exactly one predicate, not %d", where, len(p.Predicates))
		}
		var errs []error
		for i, q := range p.Predicates {
			errs = append(errs, q.validate(fmt.Sprintf("%s.predicates[%d]", where, i), depth+1))
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("%s: unknown predicate type %q", where, p.Type)
}

// Rule is one verb on one resource of one group: the unit permissions are compared in.
type Rule struct {
	Group, Resource, Verb string
}

func (r Rule) String() string {
	return fmt.Sprintf("%s %s/%s", r.Verb, r.GroupName(), r.Resource)
}

// GroupName is the rule's API group as messages spell it: "core" for the empty group.
func (r Rule) GroupName() string {
	if r.Group == "" {
		return "core"
	}
	return r.Group
}

// Rules flattens permissions into sorted, distinct rules. "*" is kept as a wildcard.
func Rules(ps []Permission) []Rule {
	set := map[Rule]struct{}{}
	for _, p := range ps {
		for _, res := range p.Resources {
			for _, v := range p.Verbs {
				set[Rule{p.Group, res, v}] = struct{}{}
			}
		}
	}
	out := make([]Rule, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		return a.Verb < b.Verb
	})
	return out
}

// Allows reports whether the permissions grant verb on resource in group. "*" matches any
// resource or verb (not any group).
func Allows(ps []Permission, group, resource, verb string) bool {
	for _, p := range ps {
		if p.Group != group {
			continue
		}
		if (slices.Contains(p.Resources, resource) || slices.Contains(p.Resources, "*")) &&
			(slices.Contains(p.Verbs, verb) || slices.Contains(p.Verbs, "*")) {
			return true
		}
	}
	return false
}

// Missing returns the rules requested that granted does not allow, sorted.
func Missing(granted, requested []Permission) []Rule {
	var out []Rule
	for _, r := range Rules(requested) {
		if !Allows(granted, r.Group, r.Resource, r.Verb) {
			out = append(out, r)
		}
	}
	return out
}
