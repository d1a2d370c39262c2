package demo

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/crd"
)

//go:embed app.yaml
var appCRD []byte

// Namespace is where the demo's objects live.
const Namespace = "demo"

var (
	AppGVK = schema.GroupVersionKind{Group: "demo.wasmrec.dev", Version: "v1", Kind: "App"}
	appGVR = schema.GroupVersionResource{Group: "demo.wasmrec.dev", Version: "v1", Resource: "apps"}
)

// InstallCRD installs the App CRD and waits until it is served.
func InstallCRD(ctx context.Context, cfg *rest.Config) error {
	crds, err := crd.Parse(appCRD)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return crd.Install(ctx, cfg, crds, 0)
}

// SeedObjects creates what the example plugins work on (existing objects are left alone):
// Apps in namespace demo (for the Go app plugin) and demo-c (for the C one), a Deployment that
// mounts a ConfigMap and opts in to the rollout plugin, and a ConfigMap the failing plugin
// fails on.
func SeedObjects(ctx context.Context, cfg *rest.Config) error {
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{Namespace, NamespaceC} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("demo: creating namespace %s: %w", ns, err)
		}
	}
	apps := dynamic.NewForConfigOrDie(cfg).Resource(appGVR)
	for ns, names := range map[string][]string{Namespace: AppNames, NamespaceC: {"frontend"}} {
		for _, name := range names {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": AppGVK.GroupVersion().String(), "kind": AppGVK.Kind,
				"metadata": map[string]any{"name": name},
				"spec":     map[string]any{"message": "hello from " + name, "port": int64(8080)},
			}}
			if _, err := apps.Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("demo: creating app %s/%s: %w", ns, name, err)
			}
		}
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: WebConfig, Namespace: Namespace}, Data: map[string]string{"greeting": "hello"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "flaky", Namespace: Namespace, Labels: map[string]string{"wasmrec.dev/demo": "always-fails"}}},
	} {
		if _, err := cs.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("demo: creating configmap %s/%s: %w", Namespace, cm.Name, err)
		}
	}
	if _, err := cs.AppsV1().Deployments(Namespace).Create(ctx, WebDeployment(Namespace), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("demo: creating deployment %s/web: %w", Namespace, err)
	}
	return nil
}

// WebDeployment is a Deployment that mounts ConfigMap WebConfig and opts in to the rollout
// plugin.
func WebDeployment(namespace string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace, Annotations: map[string]string{"wasmrec.dev/rollout-on-config-change": "true"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1", VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}}}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: WebConfig},
					}}}},
				},
			},
		},
	}
}

// Names of the demo's objects.
const (
	NamespaceC = "demo-c"
	WebConfig  = "web-config"
)

// AppNames are the Apps SeedObjects creates in Namespace.
var AppNames = []string{"frontend", "backend", "worker"}

// Churn is a runnable that, every Interval, edits an App's message, deletes an App's ConfigMap
// (which the app plugin then recreates), or edits the web Deployment's ConfigMap (which the
// rollout plugin answers by stamping a new hash on the Deployment), and says which.
type Churn struct {
	Config   *rest.Config
	Interval time.Duration
	Log      logr.Logger
}

// NeedLeaderElection is false: churn is a demo aid, not a controller.
func (*Churn) NeedLeaderElection() bool { return false }

// Name names it in the manager's messages.
func (*Churn) Name() string { return "the demo's churn" }

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
		switch n % 4 {
		case 3:
			c.Log.Info("churn: deleting a configmap; its owner will be reconciled and recreate it", "configMap", Namespace+"/"+name)
			err = cms.Delete(ctx, name, metav1.DeleteOptions{})
		case 2:
			c.Log.Info("churn: editing the web deployment's configmap; the rollout plugin will stamp a new hash", "configMap", Namespace+"/"+WebConfig)
			_, err = cms.Patch(ctx, WebConfig, types.MergePatchType, fmt.Appendf(nil, `{"data":{"greeting":"hello %d"}}`, n), metav1.PatchOptions{})
		default:
			msg := fmt.Sprintf("edit %d of %s", n, name)
			c.Log.Info("churn: editing an app", "app", Namespace+"/"+name, "message", msg)
			_, err = apps.Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"message":%q}}`, msg), metav1.PatchOptions{})
		}
		if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
			c.Log.Error(err, "churn")
		}
	}
}
