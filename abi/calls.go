package abi

import "encoding/json"

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
}

// DeleteRequest is the request of delete.
type DeleteRequest struct {
	ObjectRef
	// PropagationPolicy is "", "Orphan", "Background" or "Foreground".
	PropagationPolicy string `json:"propagationPolicy,omitempty"`
	// UID, if set, deletes only the object with this UID (a precondition).
	UID string `json:"uid,omitempty"`
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
