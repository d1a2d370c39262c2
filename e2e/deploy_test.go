package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/plugin"
)

func readManifests(t *testing.T, dirs ...string) []*unstructured.Unstructured {
	t.Helper()
	var files []string
	for _, dir := range dirs {
		more, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		must(t, err)
		files = append(files, more...) // sorted within dir, as kubectl apply -f dir takes them
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs
}

// The deploy/ manifests are accepted by a real API server as they are (server-side dry run),
// the host config in them loads, the ClusterRole covers every permission it grants, and the
// Deployment's flags exist.
func TestDeployManifests(t *testing.T) {
	for deployed, source := range map[string]string{
		"../deploy/crd-apps.yaml":         "../host/demo/app.yaml",
		"../deploy/crd-plugins.yaml":      "../host/pluginobjects/plugins.crd.yaml",
		"../deploy/admission-policy.yaml": "../host/pluginobjects/admission.yaml",
	} {
		a, err := os.ReadFile(deployed)
		must(t, err)
		b, err := os.ReadFile(source)
		must(t, err)
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s: copy it again", deployed, source)
		}
	}

	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{"wasmrec-system", "wasmrec-plugins", "tenant-a"} {
		_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	c, err := cache.New(cfg, cache.Options{})
	must(t, err)
	d := dynamic.NewForConfigOrDie(cfg)
	var hostYAML string
	var clusterRole rbacv1.ClusterRole
	var deployment *unstructured.Unstructured
	// kubectl apply -f deploy/ in one pass: each namespace an object needs is created by deploy/,
	// in a file applied before it. deploy/examples/ is for a team's namespace, applied apart.
	created := map[string]bool{}
	for _, u := range readManifests(t, "../deploy") {
		if ns := u.GetNamespace(); ns != "" && !created[ns] {
			t.Errorf("%s %s/%s: its namespace is not created by a file kubectl apply -f deploy/ takes before it", u.GetKind(), ns, u.GetName())
		}
		if u.GetKind() == "Namespace" {
			created[u.GetName()] = true
		}
	}
	for _, u := range readManifests(t, "../deploy", "../deploy/examples") {
		gvk := u.GroupVersionKind()
		m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, u.GetName(), err)
		}
		var r dynamic.ResourceInterface = d.Resource(m.Resource)
		if u.GetNamespace() != "" {
			r = d.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		body, err := u.MarshalJSON()
		must(t, err)
		if _, err := r.Patch(context.Background(), u.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "e2e", Force: ptrTo(true), DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("the API server refuses %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
		switch gvk.Kind {
		case "ConfigMap":
			hostYAML, _, _ = unstructured.NestedString(u.Object, "data", "host.yaml")
		case "ClusterRole":
			if u.GetName() == "wasmrec" { // the host's own; wasmrec-metrics-reader is the scraper's
				must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &clusterRole))
			}
		case "Deployment":
			deployment = u
		}
	}

	path := filepath.Join(t.TempDir(), "host.yaml")
	must(t, os.WriteFile(path, []byte(hostYAML), 0o600))
	hc, err := plugin.LoadHostConfig(path)
	if err != nil {
		t.Fatalf("the host config in deploy/host.yaml: %v", err)
	}
	var role []abi.Permission
	for _, r := range clusterRole.Rules {
		for _, g := range r.APIGroups {
			role = append(role, abi.Permission{Group: g, Resources: r.Resources, Verbs: r.Verbs})
		}
	}
	if hc.Impersonate == nil {
		t.Fatal("deploy/host.yaml does not impersonate plugins: the deployment shows the API server bounding each plugin")
	}
	// The plugins' RBAC is what `wasmrec rbac` prints for this config.
	rbac, err := exec.Command("../bin/wasmrec", "rbac", "--config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("wasmrec rbac: %v\n%s", err, rbac)
	}
	generated, err := os.ReadFile("../deploy/rbac-plugins.yaml")
	must(t, err)
	if got := regexp.MustCompile(`(?m)^#.*\n`).ReplaceAll(generated, nil); !bytes.Equal(got, rbac) {
		t.Errorf("deploy/rbac-plugins.yaml is not what `wasmrec rbac --config` prints for deploy/host.yaml's config: write its data.host.yaml to a file, run `wasmrec rbac --config FILE` and keep the header")
	}
	for _, p := range hc.Plugins {
		// The host's informers serve the plugins' reads: it lists and watches what they read.
		var reads []abi.Permission
		for _, r := range abi.Rules(p.Permissions) {
			if r.Verb == "get" || r.Verb == "list" || r.Verb == "watch" {
				reads = append(reads, abi.Permission{Group: r.Group, Resources: []string{r.Resource}, Verbs: []string{"list", "watch"}})
			}
		}
		if missing := abi.Missing(role, reads); len(missing) > 0 {
			t.Errorf("the host's ClusterRole lacks the reads plugin %q is granted: %v", p.Name, missing)
		}
		if _, err := os.Stat(filepath.Join("..", "bin", "plugins", filepath.Base(p.Module))); err != nil {
			t.Errorf("plugin %q: %s is not one of the plugins the image ships: %v", p.Name, p.Module, err)
		}
	}

	help, err := exec.Command("../bin/wasmrec", "run", "--help").CombinedOutput()
	must(t, err)
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	for _, arg := range args[1:] {
		flag, _, _ := strings.Cut(arg, "=")
		if !strings.Contains(string(help), flag+" ") {
			t.Errorf("the Deployment passes %s, which wasmrec run does not take", flag)
		}
	}
}
