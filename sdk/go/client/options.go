package client

import (
	"fmt"
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

// ApplyToList makes o an option of List, as controller-runtime's *ListOptions is:
// List(ctx, &list, &client.ListOptions{Namespace: ns, Fields: map[string]string{key: v}}). What
// o sets is set: its namespace and label selector replace those of the options before it, and
// its fields are added to theirs.
func (o *ListOptions) ApplyToList(t *ListOptions) {
	if o.Namespace != "" {
		t.Namespace = o.Namespace
	}
	if o.LabelSelector != "" {
		t.LabelSelector = o.LabelSelector
	}
	if len(o.Fields) > 0 {
		MatchingFields(o.Fields).ApplyToList(t)
	}
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
	// DryRun, [metav1.DryRunAll], has the API server check the delete without deleting.
	DryRun []string
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
	// DryRun, [metav1.DryRunAll], has the API server check the patch without storing it.
	DryRun []string
	// FieldManager is the field owner (FieldOwner): the write's field manager is the plugin's
	// name, "/" and it.
	FieldManager string
}

// PatchOption is an option of Patch.
type PatchOption interface{ ApplyToPatch(*PatchOptions) }

// CreateOptions is how a Create creates.
type CreateOptions struct {
	// DryRun, [metav1.DryRunAll], has the API server check the create without storing it.
	DryRun []string
	// FieldManager is the field owner (FieldOwner).
	FieldManager string
}

// CreateOption is an option of Create.
type CreateOption interface{ ApplyToCreate(*CreateOptions) }

// UpdateOptions is how an Update updates.
type UpdateOptions struct {
	// DryRun, [metav1.DryRunAll], has the API server check the update without storing it.
	DryRun []string
	// FieldManager is the field owner (FieldOwner).
	FieldManager string
}

// UpdateOption is an option of Update.
type UpdateOption interface{ ApplyToUpdate(*UpdateOptions) }

// SubResourceUpdateOptions is how Status().Update updates.
type SubResourceUpdateOptions struct{ UpdateOptions }

// SubResourceUpdateOption is an option of Status().Update.
type SubResourceUpdateOption interface {
	ApplyToSubResourceUpdate(*SubResourceUpdateOptions)
}

// SubResourcePatchOptions is how Status().Patch patches.
type SubResourcePatchOptions struct{ PatchOptions }

// SubResourcePatchOption is an option of Status().Patch.
type SubResourcePatchOption interface {
	ApplyToSubResourcePatch(*SubResourcePatchOptions)
}

type forceOwnership struct{}

func (forceOwnership) ApplyToPatch(o *PatchOptions)                       { o.Force = true }
func (forceOwnership) ApplyToSubResourcePatch(o *SubResourcePatchOptions) { o.Force = true }

// ForceOwnership makes an Apply take the fields other managers own.
var ForceOwnership = forceOwnership{}

// FieldOwner names the writer within the plugin, for a Create, Update, Patch or a status
// write. The host makes the write's field manager the plugin's name, "/" and the owner: no
// plugin writes as another manager (another plugin, kubectl, a built-in controller), so
// managedFields say "cronjob/cronjob-controller" where controller-runtime's say
// "cronjob-controller".
type FieldOwner string

func (f FieldOwner) ApplyToCreate(o *CreateOptions) { o.FieldManager = string(f) }
func (f FieldOwner) ApplyToUpdate(o *UpdateOptions) { o.FieldManager = string(f) }
func (f FieldOwner) ApplyToPatch(o *PatchOptions)   { o.FieldManager = string(f) }
func (f FieldOwner) ApplyToSubResourceUpdate(o *SubResourceUpdateOptions) {
	o.FieldManager = string(f)
}
func (f FieldOwner) ApplyToSubResourcePatch(o *SubResourcePatchOptions) {
	o.FieldManager = string(f)
}

type dryRunAll struct{}

var all = []string{metav1.DryRunAll}

func (dryRunAll) ApplyToCreate(o *CreateOptions)                       { o.DryRun = all }
func (dryRunAll) ApplyToUpdate(o *UpdateOptions)                       { o.DryRun = all }
func (dryRunAll) ApplyToPatch(o *PatchOptions)                         { o.DryRun = all }
func (dryRunAll) ApplyToDelete(o *DeleteOptions)                       { o.DryRun = all }
func (dryRunAll) ApplyToDeleteAllOf(_ *ListOptions, o *DeleteOptions)  { o.DryRun = all }
func (dryRunAll) ApplyToSubResourceUpdate(o *SubResourceUpdateOptions) { o.DryRun = all }
func (dryRunAll) ApplyToSubResourcePatch(o *SubResourcePatchOptions)   { o.DryRun = all }

// DryRunAll has the API server check a write and answer it as it would store it, storing
// nothing; the object written is filled with that answer.
var DryRunAll = dryRunAll{}

// dryRun reads a DryRun option: none, or [metav1.DryRunAll], the one value the API server
// takes.
func dryRun(v []string) (bool, error) {
	for _, s := range v {
		if s != metav1.DryRunAll {
			return false, fmt.Errorf("dryRun %q: the API server takes only %q (client.DryRunAll)", s, metav1.DryRunAll)
		}
	}
	return len(v) > 0, nil
}

// UIDPrecondition is Preconditions of a UID, for Delete.
func UIDPrecondition(uid types.UID) Preconditions { return Preconditions{UID: &uid} }
