package handler_test

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/wasmrec/wasmrec/host/event"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/reconcile"
)

func newQueue(t *testing.T) handler.Queue {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	return q
}

// drain returns the queued requests as "ns/name" strings, sorted.
func drain(q handler.Queue) []string {
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		out = append(out, r.String())
		q.Done(r)
	}
	slices.Sort(out)
	return out
}

func child(ns string, refs ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetNamespace(ns)
	u.SetName("child")
	u.SetOwnerReferences(refs)
	return u
}

func ref(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(controller)}
}

func TestEnqueueRequestForObject(t *testing.T) {
	q := newQueue(t)
	h := handler.EnqueueRequestForObject()
	h.Create(context.Background(), event.CreateEvent{Object: child("ns")}, q)
	h.Update(context.Background(), event.UpdateEvent{ObjectOld: child("ns"), ObjectNew: child("ns")}, q)
	if got := drain(q); !slices.Equal(got, []string{"ns/child"}) {
		t.Fatalf("queued %v, want [ns/child] once", got)
	}
}

func TestEnqueueRequestForOwner(t *testing.T) {
	app := schema.GroupKind{Group: "demo.wasmrec.dev", Kind: "App"}
	node := schema.GroupKind{Group: "", Kind: "Node"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(app.WithVersion("v1"), meta.RESTScopeNamespace)
	mapper.Add(node.WithVersion("v1"), meta.RESTScopeRoot)

	for _, tc := range []struct {
		name  string
		owner schema.GroupKind
		opts  []handler.OwnerOption
		obj   *unstructured.Unstructured
		want  []string
	}{
		{"controller owner in the child's namespace", app, []handler.OwnerOption{handler.OnlyControllerOwner()},
			child("ns", ref("demo.wasmrec.dev/v1", "App", "a", true)), []string{"ns/a"}},
		{"non-controller reference skipped with OnlyControllerOwner", app, []handler.OwnerOption{handler.OnlyControllerOwner()},
			child("ns", ref("demo.wasmrec.dev/v1", "App", "a", false)), nil},
		{"every matching reference without it", app, nil,
			child("ns", ref("demo.wasmrec.dev/v1", "App", "a", false), ref("demo.wasmrec.dev/v2", "App", "b", true)), []string{"ns/a", "ns/b"}},
		{"other group or kind ignored", app, nil,
			child("ns", ref("other.dev/v1", "App", "a", true), ref("demo.wasmrec.dev/v1", "Job", "b", true)), nil},
		{"cluster-scoped owner has no namespace", node, nil,
			child("ns", ref("v1", "Node", "n1", true)), []string{"/n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			h := handler.EnqueueRequestForOwner(mapper, tc.owner, tc.opts...)
			h.Create(context.Background(), event.CreateEvent{Object: tc.obj}, q)
			if got := drain(q); !slices.Equal(got, tc.want) {
				t.Fatalf("queued %v, want %v", got, tc.want)
			}
		})
	}
}

// On update, owners of both the old and the new object are enqueued: an owner that lost its
// child is reconciled too.
func TestEnqueueRequestForOwnerUpdateSeesBothOwners(t *testing.T) {
	q := newQueue(t)
	gk := schema.GroupKind{Group: "demo.wasmrec.dev", Kind: "App"}
	h := handler.EnqueueRequestForOwner(nil, gk)
	h.Update(context.Background(), event.UpdateEvent{
		ObjectOld: child("ns", ref("demo.wasmrec.dev/v1", "App", "old", true)),
		ObjectNew: child("ns", ref("demo.wasmrec.dev/v1", "App", "new", true)),
	}, q)
	if got := drain(q); !slices.Equal(got, []string{"ns/new", "ns/old"}) {
		t.Fatalf("queued %v", got)
	}
}

func TestEnqueueRequestsFromMapFunc(t *testing.T) {
	q := newQueue(t)
	h := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o event.Object) []reconcile.Request {
		return []reconcile.Request{
			{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: "x"}},
			{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: "y"}},
		}
	})
	h.Delete(context.Background(), event.DeleteEvent{Object: child("ns")}, q)
	if got := drain(q); !slices.Equal(got, []string{"ns/x", "ns/y"}) {
		t.Fatalf("queued %v", got)
	}
}
