package reference

import (
	"testing"

	batchv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/batch/v1"
	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
)

func TestGetReference(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u-1", ResourceVersion: "7"}}
	got, err := GetReference(job)
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Name: "j", Namespace: "ns", UID: "u-1", ResourceVersion: "7"}
	if *got != want {
		t.Errorf("GetReference = %+v, want %+v", *got, want)
	}
	if _, err := GetReference(nil); err != ErrNilObject {
		t.Errorf("GetReference(nil) = %v, want ErrNilObject", err)
	}
}
