package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// ObjectRef names one object: the request of get, and the base of the others.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// GetRequest is the request of get: the object's ref and, optionally, the encoding the guest
// would rather have the answer in.
type GetRequest struct {
	ObjectRef
	// Encoding is "" or EncodingJSON for JSON, or EncodingProtobuf: see Encoding*.
	Encoding string `json:"encoding,omitempty"`
}

// ListRequest is the request of list. The response is {"items": [objects]}, or with
// EncodingProtobuf the kind's List (ConfigMapList...) in the Kubernetes protobuf envelope.
type ListRequest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace limits the list to one namespace; empty lists all.
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector in the string form kubectl takes ("app=web,tier in (a,b)").
	LabelSelector string `json:"labelSelector,omitempty"`
	// Encoding is "" or EncodingJSON for JSON, or EncodingProtobuf: see Encoding*.
	Encoding string `json:"encoding,omitempty"`
	// Fields are values the items must have (controller-runtime's MatchingFields), by field:
	// metadata.name, metadata.namespace, or a field index the guest computes itself. The host
	// tests the metadata fields; of an index it leaves out the items whose values Indexed (of
	// this list or an earlier one of the same module) shows lack the value, and returns the
	// rest, for the guest to test. A host that predates the field returns every item.
	Fields map[string]string `json:"fields,omitempty"`
	// Indexed tells the host the values of the guest's field indexes for object versions, for
	// Fields to use in this list and later ones. The host may forget them at any time.
	Indexed []IndexValues `json:"indexed,omitempty"`
}

// IndexValues are the values of one field index for one version of one object.
type IndexValues struct {
	UID             string   `json:"uid"`
	ResourceVersion string   `json:"resourceVersion"`
	Field           string   `json:"field"`
	Values          []string `json:"values"`
}

// Encodings a get or list may ask for. A host answers EncodingProtobuf only for the built-in
// kinds it has Go types of; for any other kind (a CRD's, say), and a host that predates the
// field, the answer is JSON. The guest tells which it got from the first bytes: ProtobufMagic,
// or JSON's '{'.
const (
	EncodingJSON     = "json"
	EncodingProtobuf = "protobuf"
)

// ProtobufMagic starts an answer in the Kubernetes protobuf envelope (what the API server sends
// for application/vnd.kubernetes.protobuf): the magic, then a runtime.Unknown message whose
// field 1 is the TypeMeta (apiVersion 1, kind 2) and field 2 the object's protobuf encoding.
const ProtobufMagic = "k8s\x00"

// ListResponse is the response of list.
type ListResponse struct {
	Items []json.RawMessage `json:"items"`
}

// Patch types.
const (
	PatchMerge     = "merge"     // application/merge-patch+json
	PatchJSON      = "json"      // application/json-patch+json
	PatchStrategic = "strategic" // application/strategic-merge-patch+json (built-in kinds only)
	PatchApply     = "apply"     // server-side apply
)

// PatchRequest is the request of patch.
type PatchRequest struct {
	ObjectRef
	// Type is one of the Patch* constants.
	Type string `json:"type"`
	// Patch is the patch document (for apply: the object as the plugin wants it).
	Patch json.RawMessage `json:"patch"`
	// Subresource is "" or "status".
	Subresource string `json:"subresource,omitempty"`
	// Force takes ownership of conflicting fields on apply.
	Force bool `json:"force,omitempty"`
	WriteOptions
}

// DeleteRequest is the request of delete.
type DeleteRequest struct {
	ObjectRef
	// PropagationPolicy is "", "Orphan", "Background" or "Foreground".
	PropagationPolicy string `json:"propagationPolicy,omitempty"`
	// UID, if set, deletes only the object with this UID (a precondition).
	UID string `json:"uid,omitempty"`
	// DryRun has the API server check the delete and answer it without deleting.
	DryRun bool `json:"dryRun,omitempty"`
}

// WriteOptions are what a write may say beside its object or patch: a patch's request holds
// them, a create's, update's or update_status's a WriteRequest around the object.
type WriteOptions struct {
	// FieldOwner names the writer within the plugin, as controller-runtime's client.FieldOwner
	// does: the write's field manager is then the plugin's name, "/" and it (FieldManager).
	// Empty: the plugin's name alone.
	FieldOwner string `json:"fieldOwner,omitempty"`
	// DryRun has the API server check the write and answer the object as it would store it,
	// storing nothing (the API server's dryRun=All).
	DryRun bool `json:"dryRun,omitempty"`
}

// WriteRequest is the request of create, update and update_status when the write has options:
// the object, under "object", beside them. Without options the request is the object itself.
type WriteRequest struct {
	Object json.RawMessage `json:"object"`
	WriteOptions
}

// String says the options as a person reads them: `dryRun, fieldOwner "o"`, or "none".
func (o WriteOptions) String() string {
	var s []string
	if o.DryRun {
		s = append(s, "dryRun")
	}
	if o.FieldOwner != "" {
		s = append(s, fmt.Sprintf("fieldOwner %q", o.FieldOwner))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Wrap is the request of a create, update or update_status of object (its JSON) with these
// options: object itself when there are none, else a WriteRequest. SplitWrite undoes it.
func (o WriteOptions) Wrap(object []byte) []byte {
	if o == (WriteOptions{}) {
		return object
	}
	b := make([]byte, 0, len(object)+48+len(o.FieldOwner))
	b = append(b, `{"object":`...)
	b = append(b, object...)
	if o.FieldOwner != "" {
		owner, _ := json.Marshal(o.FieldOwner) // a string always encodes
		b = append(b, `,"fieldOwner":`...)
		b = append(b, owner...)
	}
	if o.DryRun {
		b = append(b, `,"dryRun":true`...)
	}
	return append(b, '}')
}

// SplitWrite returns the object and the options of a create's, update's or update_status's
// request: a WriteRequest, or the object itself. A request is a WriteRequest when it has an
// "object" and no "apiVersion": every object a write names has an apiVersion, and a custom
// resource may have a field called object.
func SplitWrite(body []byte) (object []byte, opts WriteOptions, err error) {
	if !bytes.Contains(body, []byte(`"object"`)) { // most writes: no envelope, nothing to decode
		return body, WriteOptions{}, nil
	}
	var r struct {
		APIVersion json.RawMessage `json:"apiVersion"`
		WriteRequest
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, WriteOptions{}, err
	}
	if r.Object == nil || r.APIVersion != nil {
		return body, WriteOptions{}, nil
	}
	return r.Object, r.WriteOptions, nil
}

// PatchSetsManagedFields reports whether a patch of type typ (Patch*) writes
// metadata.managedFields, which no plugin may: the API server keeps them, and a plugin that set
// them could give its fields to another manager, or take away theirs. (A create's or update's
// object has them cut out instead, as the host's answers have.) A patch that does not decode is
// not looked into: the API server refuses it.
func PatchSetsManagedFields(typ string, patch []byte) bool {
	if !bytes.Contains(patch, []byte("managedFields")) {
		return false
	}
	if typ != PatchJSON {
		return hasManagedFields(patch)
	}
	var ops []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(patch, &ops) != nil {
		return false
	}
	for _, op := range ops {
		switch {
		case op.Path == "/metadata/managedFields" || strings.HasPrefix(op.Path, "/metadata/managedFields/"):
			return true
		case op.Path == "/metadata":
			var md map[string]json.RawMessage
			if json.Unmarshal(op.Value, &md) == nil && md["managedFields"] != nil {
				return true
			}
		case op.Path == "" && hasManagedFields(op.Value):
			return true
		}
	}
	return false
}

// hasManagedFields reports an object (or merge patch) whose metadata has managedFields.
func hasManagedFields(obj []byte) bool {
	var o struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	return json.Unmarshal(obj, &o) == nil && o.Metadata["managedFields"] != nil
}

// MaxFieldManager is the API server's bound on a field manager's length.
const MaxFieldManager = 128

// FieldManager is the field manager of a write by plugin (its name as the operator gave it: a
// Plugin object's namespace and name) with the given field owner: the plugin's name, or with an
// owner the plugin's name, "/" and the owner. The plugin's name is always in it, so no plugin
// writes under a manager that is not its own. An owner that is blank, not printable text, or
// that makes the manager longer than the API server allows is an error that says so.
func FieldManager(plugin, owner string) (string, error) {
	if owner == "" {
		return plugin, nil
	}
	if strings.TrimSpace(owner) == "" {
		return "", fmt.Errorf("fieldOwner %q is blank: name the writer, or leave the owner out", owner)
	}
	for _, r := range owner {
		if !unicode.IsPrint(r) {
			return "", fmt.Errorf("fieldOwner %s: use printable characters only", clipQuote(owner))
		}
	}
	m := plugin + "/" + owner
	if len(m) > MaxFieldManager {
		return "", fmt.Errorf("fieldOwner %s: with the plugin's name %q the field manager would be %d bytes, over the API server's %d: use a shorter owner", clipQuote(owner), plugin, len(m), MaxFieldManager)
	}
	return m, nil
}

// clipQuote is s quoted, cut to its first 40 bytes: an owner said back in an error.
func clipQuote(s string) string {
	if len(s) <= 40 {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:40]) + "..."
}

// EventRequest is the request of event: a Kubernetes Event about an object.
type EventRequest struct {
	// Object the event is about; empty means the object being reconciled, of the For kind.
	Object *ObjectRef `json:"object,omitempty"`
	// Type is "Normal" or "Warning".
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}
