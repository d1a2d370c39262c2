package event

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is what the cache holds: anything with object metadata and a kind. Objects from the
// shared informers are *object.Object (metadata and JSON); metadata-only informers give
// *metav1.PartialObjectMetadata.
type Object interface {
	metav1.Object
	runtime.Object
}

// CreateEvent is an object seen for the first time: created, or listed when an informer starts.
type CreateEvent struct {
	Object Object
}

// UpdateEvent is an object that changed; resyncs deliver it with ObjectOld == ObjectNew.
type UpdateEvent struct {
	ObjectOld Object
	ObjectNew Object
}

// DeleteEvent is an object that is gone. DeleteStateUnknown is true when the informer missed
// the delete and Object is the last state it knew.
type DeleteEvent struct {
	Object             Object
	DeleteStateUnknown bool
}

// GenericEvent comes from outside the cluster (a timer, a file, another system).
type GenericEvent struct {
	Object Object
}
