package e2e

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wasmrec/wasmrec/sdk/go/client"
	"github.com/wasmrec/wasmrec/sdk/go/codec"
	wappsv1 "github.com/wasmrec/wasmrec/sdk/go/k8s/api/apps/v1"
)

// A plugin's StrategicMergeFrom, from a copy read before another writer added a container,
// sends the patch controller-runtime's StrategicMergeFrom sends for the same change, and the
// API server merges it by key: the plugin's changes are made, the other writer's container
// stays.
func TestStrategicMergeFromIsMergedByTheAPIServer(t *testing.T) {
	ns := namespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	d, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Finalizers: []string{"a.example/x", "b.example/y"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "web", Image: "nginx:1", Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}},
				{Name: "log", Image: "busybox"},
			}}},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_, _ = cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	// What the plugin read: the Deployment as the generated type decodes it.
	read, err := json.Marshal(d)
	must(t, err)
	var plugin wappsv1.Deployment
	must(t, codec.Unmarshal(read, &plugin))

	// Another writer adds a container.
	other := d.DeepCopy()
	other.Spec.Template.Spec.Containers = append(other.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "envoy"})
	_, err = cs.AppsV1().Deployments(ns).Update(ctx, other, metav1.UpdateOptions{})
	must(t, err)

	// The plugin changes its copy; controller-runtime's user changes the same k8s.io/api copy.
	orig := plugin.DeepCopy()
	web := &plugin.Spec.Template.Spec.Containers[0]
	web.Image, web.Env = "nginx:2", web.Env[1:]
	plugin.Spec.Template.Spec.Containers = plugin.Spec.Template.Spec.Containers[:1]
	plugin.Finalizers = []string{"b.example/y"}
	patch, err := client.StrategicMergeFrom(orig).Data(&plugin)
	must(t, err)

	crOrig := d.DeepCopy()
	crWeb := &d.Spec.Template.Spec.Containers[0]
	crWeb.Image, crWeb.Env = "nginx:2", crWeb.Env[1:]
	d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[:1]
	d.Finalizers = []string{"b.example/y"}
	crPatch, err := crclient.StrategicMergeFrom(crOrig).Data(d)
	must(t, err)
	var a, b any
	must(t, json.Unmarshal(patch, &a))
	must(t, json.Unmarshal(crPatch, &b))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the plugin's patch\n %s\nis not controller-runtime's\n %s", patch, crPatch)
	}

	got, err := cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	must(t, err)
	var containers []string
	for _, c := range got.Spec.Template.Spec.Containers {
		containers = append(containers, c.Name+"="+c.Image)
	}
	if s := strings.Join(containers, " "); s != "web=nginx:2 sidecar=envoy" {
		t.Fatalf("containers after the patch: %s, want web=nginx:2 sidecar=envoy (patch %s)", s, patch)
	}
	if env := got.Spec.Template.Spec.Containers[0].Env; len(env) != 1 || env[0].Name != "B" {
		t.Fatalf("env after the patch: %+v", env)
	}
	if !reflect.DeepEqual(got.Finalizers, []string{"b.example/y"}) {
		t.Fatalf("finalizers after the patch: %v", got.Finalizers)
	}
}
