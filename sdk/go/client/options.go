package client

import (
	"slices"
	"strings"

	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/types"
)

// ListOptions is what a List selects.
type ListOptions struct {
	// Namespace limits the list to one namespace; "" lists all.
	Namespace string
	// LabelSelector in kubectl's form: "app=web,tier in (a,b)".
	LabelSelector string
	// Fields are indexed fields and the value each must have (MatchingFields).
	Fields map[string]string
}

// ApplyOptions applies opts to o.
func (o *ListOptions) ApplyOptions(opts []ListOption) *ListOptions {
	for _, opt := range opts {
		opt.ApplyToList(o)
	}
	return o
}

// ListOption is an option of List (and DeleteAllOf).
type ListOption interface{ ApplyToList(*ListOptions) }

// DeleteAllOfOption is an option of DeleteAllOf: a ListOption or a DeleteOption.
type DeleteAllOfOption interface {
	ApplyToDeleteAllOf(*ListOptions, *DeleteOptions)
}

// InNamespace lists (or deletes) in one namespace.
type InNamespace string

func (n InNamespace) ApplyToList(o *ListOptions)                          { o.Namespace = string(n) }
func (n InNamespace) ApplyToDeleteAllOf(o *ListOptions, _ *DeleteOptions) { o.Namespace = string(n) }

// MatchingLabels selects objects with all these labels and values.
type MatchingLabels map[string]string

func (m MatchingLabels) ApplyToList(o *ListOptions) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	terms := make([]string, 0, len(keys))
	for _, k := range keys {
		terms = append(terms, k+"="+m[k])
	}
	o.LabelSelector = and(o.LabelSelector, strings.Join(terms, ","))
}

func (m MatchingLabels) ApplyToDeleteAllOf(o *ListOptions, _ *DeleteOptions) { m.ApplyToList(o) }

// HasLabels selects objects that have these labels, whatever their values.
type HasLabels []string

func (h HasLabels) ApplyToList(o *ListOptions) {
	o.LabelSelector = and(o.LabelSelector, strings.Join(h, ","))
}

func (h HasLabels) ApplyToDeleteAllOf(o *ListOptions, _ *DeleteOptions) { h.ApplyToList(o) }

// MatchingLabelSelector selects objects by a selector in kubectl's form ("app=web,tier in
// (a,b)", "!legacy"); it stands for controller-runtime's MatchingLabelsSelector, which takes a
// labels.Selector.
type MatchingLabelSelector string

func (s MatchingLabelSelector) ApplyToList(o *ListOptions) {
	o.LabelSelector = and(o.LabelSelector, string(s))
}

func (s MatchingLabelSelector) ApplyToDeleteAllOf(o *ListOptions, _ *DeleteOptions) {
	s.ApplyToList(o)
}

// MatchingFields selects objects whose indexed fields have these values: an index registered
// with Client.IndexField, or metadata.name or metadata.namespace.
type MatchingFields map[string]string

func (m MatchingFields) ApplyToList(o *ListOptions) {
	if o.Fields == nil {
		o.Fields = map[string]string{}
	}
	for k, v := range m {
		o.Fields[k] = v
	}
}

func (m MatchingFields) ApplyToDeleteAllOf(o *ListOptions, _ *DeleteOptions) { m.ApplyToList(o) }

func and(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "," + b
}

// DeleteOptions is how a Delete deletes.
type DeleteOptions struct {
	PropagationPolicy *metav1.DeletionPropagation
	Preconditions     *metav1.Preconditions
}

// DeleteOption is an option of Delete (and DeleteAllOf).
type DeleteOption interface{ ApplyToDelete(*DeleteOptions) }

// PropagationPolicy says what happens to the object's dependents: Orphan, Background or
// Foreground (metav1.DeletePropagation*).
type PropagationPolicy metav1.DeletionPropagation

func (p PropagationPolicy) ApplyToDelete(o *DeleteOptions) {
	v := metav1.DeletionPropagation(p)
	o.PropagationPolicy = &v
}

func (p PropagationPolicy) ApplyToDeleteAllOf(_ *ListOptions, o *DeleteOptions) { p.ApplyToDelete(o) }

// Preconditions deletes only the object with this UID (a resourceVersion precondition is not
// carried: the host's delete takes the UID only).
type Preconditions metav1.Preconditions

func (p Preconditions) ApplyToDelete(o *DeleteOptions) {
	v := metav1.Preconditions(p)
	o.Preconditions = &v
}

func (p Preconditions) ApplyToDeleteAllOf(_ *ListOptions, o *DeleteOptions) { p.ApplyToDelete(o) }

// PatchOptions is how a Patch patches.
type PatchOptions struct {
	// Force takes the fields of other managers on Apply.
	Force bool
}

// PatchOption is an option of Patch.
type PatchOption interface{ ApplyToPatch(*PatchOptions) }

type forceOwnership struct{}

func (forceOwnership) ApplyToPatch(o *PatchOptions) { o.Force = true }

// ForceOwnership makes an Apply take the fields other managers own.
var ForceOwnership PatchOption = forceOwnership{}

// UIDPrecondition is Preconditions of a UID, for Delete.
func UIDPrecondition(uid types.UID) Preconditions { return Preconditions{UID: &uid} }
