package reference

import (
	"errors"
	"fmt"

	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/runtime"
)

// ErrNilObject is GetReference's error for a nil object.
var ErrNilObject = errors.New("can't reference a nil object")

// GetReference is a reference to obj: its kind and apiVersion (from its type, as client-go's
// takes them from the scheme; there is no scheme argument), name, namespace, UID and
// resourceVersion.
func GetReference(obj runtime.Object) (*corev1.ObjectReference, error) {
	if obj == nil {
		return nil, ErrNilObject
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata to reference", obj)
	}
	apiVersion, kind := obj.APIVersionKind()
	return &corev1.ObjectReference{
		Kind:            kind,
		APIVersion:      apiVersion,
		Name:            m.GetName(),
		Namespace:       m.GetNamespace(),
		UID:             m.GetUID(),
		ResourceVersion: m.GetResourceVersion(),
	}, nil
}
