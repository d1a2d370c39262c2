package kinds

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseFor(t *testing.T) {
	for _, tc := range []struct {
		in                    string
		group, kind, resource string
		namespaced, builtIn   bool
		err                   string
	}{
		{in: "v1/ConfigMap", kind: "ConfigMap", resource: "configmaps", namespaced: true, builtIn: true},
		{in: "apps/v1/Deployment", group: "apps", kind: "Deployment", resource: "deployments", namespaced: true, builtIn: true},
		{in: "v1/Namespace", kind: "Namespace", resource: "namespaces", builtIn: true},
		{in: "rbac.authorization.k8s.io/v1/ClusterRole", group: "rbac.authorization.k8s.io", kind: "ClusterRole", resource: "clusterroles", builtIn: true},
		{in: "example.com/v1alpha1/Policy", group: "example.com", kind: "Policy", resource: "policies", namespaced: true},
		{in: "v1/ConfigMaps", err: "v1 has no kind ConfigMaps: did you mean ConfigMap?"},
		{in: "v1/configmap", err: "did you mean ConfigMap?"},
		{in: "apps/v2/Deployment", err: "apps/v2 has no kind Deployment: did you mean apps/v1 Deployment?"},
		{in: "example.com/Widget", err: `"example.com" is an API group without its version: write GROUP/VERSION/KIND, as in example.com/v1/Widget`},
		{in: "v1/Deployment", err: "v1 has no kind Deployment: did you mean apps/v1 Deployment?"},
		{in: "v1/deployment", err: "v1 has no kind deployment: did you mean apps/v1 Deployment?"},
		{in: "v1/Zebra", err: "v1 has no kind Zebra"},
		{in: "ConfigMap", err: "write APIVERSION/KIND"},
		{in: "v1/", err: "write APIVERSION/KIND"},
	} {
		k, err := ParseFor(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseFor(%q) = %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFor(%q): %v", tc.in, err)
			continue
		}
		if k.Group != tc.group || k.Kind != tc.kind || k.Resource != tc.resource || k.Namespaced != tc.namespaced || k.BuiltIn != tc.builtIn {
			t.Errorf("ParseFor(%q) = %+v", tc.in, k)
		}
	}
}

func TestString(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"v1", "ConfigMap"}:            "ConfigMap.v1",
		{"apps/v1", "Deployment"}:      "Deployment.v1.apps",
		{"demo.wasmrec.dev/v1", "App"}: "App.v1.demo.wasmrec.dev",
	} {
		if got := String(in[0], in[1]); got != want {
			t.Errorf("String(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
	if got := GVKs([]schema.GroupVersionKind{{Version: "v1", Kind: "Secret"}, {Group: "apps", Version: "v1", Kind: "Deployment"}}); got != "Secret.v1, Deployment.v1.apps" {
		t.Errorf("GVKs = %q", got)
	}
}

// The host looks kinds up from several plugins' loads at once (run with -race).
func TestConcurrentLookups(t *testing.T) {
	done := make(chan bool)
	for range 8 {
		go func() {
			done <- Lookup(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}).BuiltIn && BuiltInGroup("apps")
		}()
	}
	for range 8 {
		if !<-done {
			t.Error("ConfigMap.v1 not known as built in")
		}
	}
}
