// Command crhash is the controller-runtime side of the e2e BenchmarkConfigMapHash: for each
// ConfigMap, it merge-patches the annotation bench/hash to the FNV-64a of its sorted data,
// unless it already holds it. It runs with controller-runtime's default options and 2 workers;
// the wasmrec guests hashgo and hashc do the same.
package main

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Usage: crhash --kubeconfig FILE --namespace NS (or KUBECONFIG in the environment); without
// --namespace, every namespace.
func main() {
	namespace := flag.String("namespace", "", "reconcile the ConfigMaps of this namespace (default: every namespace)")
	flag.Parse() // controller-runtime's config package adds --kubeconfig
	if err := run(*namespace); err != nil {
		fmt.Fprintln(os.Stderr, "crhash:", err)
		os.Exit(1)
	}
}

func run(namespace string) error {
	cfg, err := ctrl.GetConfig() // as a controller-runtime user gets it, client-side limits and all
	if err != nil {
		return err
	}
	// Default options, but no metrics server: wasmrec serves none by default either.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	c := mgr.GetClient()
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return namespace == "" || o.GetNamespace() == namespace })
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		WithEventFilter(inNamespace).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			sum := hash(cm.Data)
			if cm.Annotations["bench/hash"] == sum {
				return ctrl.Result{}, nil
			}
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"bench/hash":%q}}}`, sum)
			err := c.Patch(ctx, &cm, client.RawPatch("application/merge-patch+json", patch))
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, err
		}))
	if err != nil {
		return err
	}
	fmt.Println("crhash: started")
	return mgr.Start(ctrl.SetupSignalHandler())
}

// hash is FNV-64a over key=value\n of the data, in key order, in hex.
func hash(data map[string]string) string {
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		h.Write([]byte(k))
		h.Write([]byte{'='})
		h.Write([]byte(data[k]))
		h.Write([]byte{'\n'})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}
