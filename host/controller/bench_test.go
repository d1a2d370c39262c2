package controller_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"k8s.io/utils/ptr"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	crhandler "sigs.k8s.io/controller-runtime/pkg/handler"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
)

// BenchmarkPipeline measures one object event through a real shared informer, the handler, the
// queue and a worker into a no-op reconcile: ns/op is the cost per item, items/s the throughput.
// The same informer feeds controller-runtime's controller in the "controller-runtime" cases, so
// the two are compared in one run. The events come from client-go's in-memory ListWatch, so the
// figures are the host's own cost, not the API server's.
func BenchmarkPipeline(b *testing.B) {
	for _, impl := range []string{"wasmrec", "controller-runtime"} {
		for _, workers := range []int{1, 2, 8} {
			b.Run(fmt.Sprintf("%s/workers=%d", impl, workers), func(b *testing.B) {
				benchPipeline(b, impl, workers)
			})
		}
	}
}

func benchPipeline(b *testing.B, impl string, workers int) {
	src := fcache.NewFakeControllerSource()
	defer src.Shutdown()
	inf := toolscache.NewSharedIndexInformer(src, &corev1.ConfigMap{}, 0, toolscache.Indexers{})

	var done atomic.Int64
	target := int64(b.N)
	finished := make(chan struct{})
	count := func() {
		if done.Add(1) == target {
			close(finished)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{}, 2)
	go func() { inf.RunWithContext(ctx); stopped <- struct{}{} }()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("informer did not sync")
	}

	switch impl {
	case "wasmrec":
		c, err := controller.New("bench", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			count()
			return reconcile.Result{}, nil
		}), controller.Options{MaxConcurrentReconciles: workers})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Watch(source.Informer(inf, handler.EnqueueRequestForObject())); err != nil {
			b.Fatal(err)
		}
		go func() { _ = c.Start(ctx); stopped <- struct{}{} }()
	case "controller-runtime":
		c, err := crcontroller.NewUnmanaged("bench", crcontroller.Options{
			MaxConcurrentReconciles: workers,
			SkipNameValidation:      ptr.To(true),
			Reconciler: crreconcile.Func(func(context.Context, crreconcile.Request) (crreconcile.Result, error) {
				count()
				return crreconcile.Result{}, nil
			}),
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Watch(&crsource.Informer{Informer: inf, Handler: &crhandler.EnqueueRequestForObject{}}); err != nil {
			b.Fatal(err)
		}
		go func() { _ = c.Start(ctx); stopped <- struct{}{} }()
	}

	objs := make([]*corev1.ConfigMap, b.N)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprint("cm-", i)}}
	}
	// Let the controller's workers start before the clock does.
	time.Sleep(50 * time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, o := range objs {
		src.Add(o)
	}
	select {
	case <-finished:
	case <-time.After(time.Minute):
		b.Fatalf("%d of %d items reconciled after a minute", done.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
	cancel()
	<-stopped
	<-stopped
}
