package equality_test

import (
	"testing"
	"time"

	corev1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/core/v1"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/equality"
	"github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/api/resource"
	metav1 "github.com/wasmrec/wasmrec/sdk/go/k8s/apimachinery/pkg/apis/meta/v1"
)

func TestSemanticDeepEqual(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	empty := ""
	for _, c := range []struct {
		name string
		a, b any
		want bool
	}{
		{"nil and empty maps", &corev1.ConfigMap{Data: nil}, &corev1.ConfigMap{Data: map[string]string{}}, true},
		{"nil and empty []byte values", &corev1.ConfigMap{BinaryData: map[string][]byte{"k": nil}}, &corev1.ConfigMap{BinaryData: map[string][]byte{"k": {}}}, true},
		{"nil and empty slices", &corev1.PodSpec{Containers: nil}, &corev1.PodSpec{Containers: []corev1.Container{}}, true},
		{"a value that differs", &corev1.ConfigMap{Data: map[string]string{"k": "a"}}, &corev1.ConfigMap{Data: map[string]string{"k": "b"}}, false},
		{"a key that differs", &corev1.ConfigMap{Data: map[string]string{"k": ""}}, &corev1.ConfigMap{Data: map[string]string{"j": ""}}, false},
		{"a nil pointer and one to an empty string", &corev1.PersistentVolumeClaimSpec{}, &corev1.PersistentVolumeClaimSpec{StorageClassName: new(string)}, false},
		{"two types", &corev1.ObjectReference{}, &corev1.LocalObjectReference{}, false},
		{"nil and a pointer to empty", &corev1.SecretKeySelector{Optional: nil}, &corev1.SecretKeySelector{Optional: new(bool)}, false},
		{"the same time in two locations", metav1.NewTime(at), metav1.NewTime(at.In(time.FixedZone("x", 3600))), true},
		{"two times", metav1.NewTime(at), metav1.NewTime(at.Add(time.Second)), false},
		{"equal quantities", resource.MustParse("1Gi"), resource.MustParse("1Gi"), true},
		{"other quantities", resource.MustParse("1Gi"), resource.MustParse("2Gi"), false},
		{"nil and nil", nil, nil, true},
		{"nil and a value", nil, &corev1.ConfigMap{}, false},
		{"two pointers to empty strings", &empty, new(string), true},
	} {
		if got := equality.Semantic.DeepEqual(c.a, c.b); got != c.want {
			t.Errorf("%s: DeepEqual = %v, want %v", c.name, got, c.want)
		}
	}
}
