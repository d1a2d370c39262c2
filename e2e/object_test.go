package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/object"
)

// What a guest reads from the cache can be written back as it is: the update keeps the
// last-applied annotation and managedFields on the server. Failed writes carry the API server's
// reason and message.
func TestObjectsReadFromTheCacheWriteBack(t *testing.T) {
	ns := namespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "applied", Annotations: map[string]string{object.LastApplied: `{"data":{"k":"v"}}`, "other": "x"}},
		Data:       map[string]string{"k": "v ✓ \"quoted\""},
	}, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
	must(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := cache.New(cfg, cache.Options{})
	must(t, err)
	go func() { _ = c.Start(ctx) }()
	inf, err := c.Acquire(cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap")})
	must(t, err)
	defer inf.Release()
	must(t, inf.WaitForSync(ctx))
	got, err := inf.Get(ns, "applied")
	must(t, err)
	o := got.(*object.Object)
	if _, ok := o.Annotations[object.LastApplied]; ok || o.ManagedFields != nil {
		t.Errorf("the cached metadata keeps what handlers never read: %v, %v", o.Annotations, o.ManagedFields)
	}
	if strings.Contains(string(o.Raw), "managedFields") || !strings.Contains(string(o.Raw), object.LastApplied) || !strings.Contains(string(o.Raw), `v ✓ \"quoted\"`) {
		t.Errorf("Raw should drop managedFields only: %s", o.Raw)
	}

	objs, err := object.NewClient(cfg)
	must(t, err)
	r := objs.Resource(corev1.SchemeGroupVersion.WithResource("configmaps"), ns)
	if _, err := r.Update(context.Background(), "applied", o.Raw, metav1.UpdateOptions{FieldManager: "guest"}); err != nil {
		t.Fatal(err)
	}
	after, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "applied", metav1.GetOptions{})
	must(t, err)
	if after.Annotations[object.LastApplied] == "" || after.Annotations["other"] != "x" || len(after.ManagedFields) == 0 {
		t.Errorf("an update of what the cache holds lost annotations or managedFields: %v, %d managedFields", after.Annotations, len(after.ManagedFields))
	}

	_, err = r.Create(context.Background(), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}`), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Bad_Name") {
		t.Errorf("an invalid create gave %v, want the API server's Invalid with its message", err)
	}
	stale := strings.Replace(string(o.Raw), `"resourceVersion":"`+o.ResourceVersion+`"`, `"resourceVersion":"1"`, 1)
	_, err = r.Update(context.Background(), "applied", []byte(stale), metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "the object has been modified") {
		t.Errorf("a stale update gave %v, want the API server's Conflict with its message", err)
	}
}
