package demo

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/controller"
	"github.com/wasmrec/wasmrec/host/crd"
	"github.com/wasmrec/wasmrec/host/handler"
	"github.com/wasmrec/wasmrec/host/manager"
	"github.com/wasmrec/wasmrec/host/predicate"
	"github.com/wasmrec/wasmrec/host/reconcile"
	"github.com/wasmrec/wasmrec/host/source"
)

//go:embed app.yaml
var appCRD []byte

// Namespace is where the demo's objects live.
const Namespace = "demo"

var (
	AppGVK       = schema.GroupVersionKind{Group: "demo.wasmrec.dev", Version: "v1", Kind: "App"}
	appGVR       = schema.GroupVersionResource{Group: "demo.wasmrec.dev", Version: "v1", Resource: "apps"}
	configMapKey = cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap")}
)

// InstallCRD installs the App CRD and waits until it is served.
func InstallCRD(ctx context.Context, cfg *rest.Config) error {
	crds, err := crd.Parse(appCRD)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return crd.Install(ctx, cfg, crds, 0)
}

// Setup adds the App controller to m.
func Setup(m *manager.Manager, log logr.Logger) error {
	cfg := m.GetConfig()
	r := &AppReconciler{
		Apps:       dynamic.NewForConfigOrDie(cfg).Resource(appGVR),
		ConfigMaps: kubernetes.NewForConfigOrDie(cfg).CoreV1(),
		Log:        log,
	}
	var err error
	if r.appReads, err = m.GetCache().Acquire(cache.Key{GroupVersionKind: AppGVK}); err != nil {
		return err
	}
	if r.cmReads, err = m.GetCache().Acquire(configMapKey); err != nil {
		r.appReads.Release()
		return err
	}
	c, err := controller.New("app", r, controller.Options{MaxConcurrentReconciles: 2, Logger: log})
	if err != nil {
		return err
	}
	owns := handler.EnqueueRequestForOwner(m.GetCache().RESTMapper(), AppGVK.GroupKind(), handler.OnlyControllerOwner())
	for _, src := range []source.Source{
		source.Kind(m.GetCache(), cache.Key{GroupVersionKind: AppGVK}, handler.EnqueueRequestForObject(), predicate.GenerationChanged()),
		source.Kind(m.GetCache(), configMapKey, owns),
	} {
		if err := c.Watch(src); err != nil {
			return err
		}
	}
	return m.Add(c)
}

// AppReconciler keeps a ConfigMap named after each App holding the App's message, owned by the
// App, and reports it in the App's status.
type AppReconciler struct {
	Apps       dynamic.NamespaceableResourceInterface
	ConfigMaps interface {
		ConfigMaps(namespace string) typedcorev1.ConfigMapInterface
	}
	Log logr.Logger

	appReads, cmReads *cache.Informer
}

var _ reconcile.Reconciler = (*AppReconciler)(nil)

// Reconcile makes the App's ConfigMap match its spec.
func (r *AppReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj, err := r.appReads.Get(req.Namespace, req.Name)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil // deleted; its ConfigMap goes with it (owner reference)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	app := obj.(*unstructured.Unstructured)
	message, _, _ := unstructured.NestedString(app.Object, "spec", "message")

	action, err := r.ensureConfigMap(ctx, app, message)
	if apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
		// The cache lags a change to the ConfigMap (ours, or churn's): come back once it caught up.
		r.Log.V(1).Info("configmap changed under us; requeueing", "app", req.String(), "reason", err.Error())
		return reconcile.Result{Requeue: true}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.writeStatus(ctx, app); apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, nil // the App changed under us: read it again
	} else if err != nil {
		return reconcile.Result{}, err
	}
	r.Log.Info("reconciled", "app", req.String(), "generation", app.GetGeneration(), "configMap", action, "message", message)
	return reconcile.Result{}, nil
}

func (r *AppReconciler) ensureConfigMap(ctx context.Context, app *unstructured.Unstructured, message string) (string, error) {
	cms := r.ConfigMaps.ConfigMaps(app.GetNamespace())
	obj, err := r.cmReads.Get(app.GetNamespace(), app.GetName())
	switch {
	case apierrors.IsNotFound(err):
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: app.GetName(), Namespace: app.GetNamespace(), OwnerReferences: []metav1.OwnerReference{{
				APIVersion: AppGVK.GroupVersion().String(), Kind: AppGVK.Kind, Name: app.GetName(), UID: app.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}},
			Data: map[string]string{"message": message},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("creating configmap %s/%s: %w", cm.Namespace, cm.Name, err) // %w keeps IsAlreadyExists working
		}
		return "created", nil
	case err != nil:
		return "", err
	}
	var cm corev1.ConfigMap
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &cm); err != nil {
		return "", err
	}
	if cm.Data["message"] == message {
		return "unchanged", nil
	}
	patch := fmt.Appendf(nil, `{"data":{"message":%q}}`, message)
	if _, err := cms.Patch(ctx, cm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return "", fmt.Errorf("updating configmap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return "updated", nil
}

func (r *AppReconciler) writeStatus(ctx context.Context, app *unstructured.Unstructured) error {
	observed, _, _ := unstructured.NestedInt64(app.Object, "status", "observedGeneration")
	if observed == app.GetGeneration() {
		return nil
	}
	status := map[string]any{
		"observedGeneration": app.GetGeneration(),
		"configMap":          app.GetName(),
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "ConfigMapInSync",
			"message":            "configmap " + app.GetName() + " holds spec.message",
			"observedGeneration": app.GetGeneration(),
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		}},
	}
	u := app.DeepCopy()
	if err := unstructured.SetNestedField(u.Object, status, "status"); err != nil {
		return err
	}
	_, err := r.Apps.Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

// SeedObjects creates the demo namespace and a few Apps (existing ones are left alone).
func SeedObjects(ctx context.Context, cfg *rest.Config) error {
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("demo: creating namespace %s: %w", Namespace, err)
	}
	apps := dynamic.NewForConfigOrDie(cfg).Resource(appGVR).Namespace(Namespace)
	for _, name := range AppNames {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": AppGVK.GroupVersion().String(), "kind": AppGVK.Kind,
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"message": "hello from " + name},
		}}
		if _, err := apps.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("demo: creating app %s/%s: %w", Namespace, name, err)
		}
	}
	return nil
}

// AppNames are the Apps SeedObjects creates.
var AppNames = []string{"frontend", "backend", "worker"}

// Churn is a runnable that, every Interval, either edits an App's message or deletes an App's
// ConfigMap (which the controller then recreates), and says which.
type Churn struct {
	Config   *rest.Config
	Interval time.Duration
	Log      logr.Logger
}

// NeedLeaderElection is false: churn is a demo aid, not a controller.
func (*Churn) NeedLeaderElection() bool { return false }

// Start churns until ctx is done.
func (c *Churn) Start(ctx context.Context) error {
	apps := dynamic.NewForConfigOrDie(c.Config).Resource(appGVR).Namespace(Namespace)
	cms := kubernetes.NewForConfigOrDie(c.Config).CoreV1().ConfigMaps(Namespace)
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		name := AppNames[rand.IntN(len(AppNames))]
		var err error
		if n%3 == 0 {
			c.Log.Info("churn: deleting a configmap; its owner will be reconciled and recreate it", "configMap", Namespace+"/"+name)
			err = cms.Delete(ctx, name, metav1.DeleteOptions{})
		} else {
			msg := fmt.Sprintf("edit %d of %s", n, name)
			c.Log.Info("churn: editing an app", "app", Namespace+"/"+name, "message", msg)
			_, err = apps.Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"message":%q}}`, msg), metav1.PatchOptions{})
		}
		if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
			c.Log.Error(err, "churn")
		}
	}
}
