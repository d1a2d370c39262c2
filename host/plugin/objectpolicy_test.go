package plugin

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObjectPolicyAllowsOnlyItsSources(t *testing.T) {
	p := ObjectPolicy{Sources: []string{"oci://registry.example.com/team-a/", "oci://registry.example.com/shared", "/var/lib/wasmrec/modules"}}
	for module, ok := range map[string]bool{
		"oci://registry.example.com/team-a/labeler:v1":         true,
		"oci://registry.example.com/team-a/labeler@sha256:ab":  true,
		"oci://registry.example.com/team-ab/labeler:v1":        false,
		"oci://registry.example.com/shared:v1":                 true,
		"oci://registry.example.com/shared/x:v1":               true,
		"oci://registry.example.com/sharedx:v1":                false,
		"oci://127.0.0.1:6443/anything:v1":                     false,
		"/var/lib/wasmrec/modules/a.wasm":                      true,
		"/var/lib/wasmrec/modules/../../../etc/passwd":         false,
		"/var/lib/wasmrec/modulesx/a.wasm":                     false,
		"oci:/var/lib/wasmrec/modules/layout:v1":               true,
		"oci:/tmp/layout:v1":                                   false,
		"oci:/var/lib/wasmrec/modules:/../../../tmp/layout:v1": false, // the check and the pull once cut this at different colons
		"oci:/var/lib/wasmrec/modules/./layout:v1":             false,
		"/var/lib/wasmrec/modules/a/../a.wasm":                 false,
		"relative.wasm":                                        false,
		"/var/run/secrets/kubernetes.io/serviceaccount/token":  false,
	} {
		err := p.AllowsSource("Plugin team-a/x", "team-a", module)
		if (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", module, err, ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "pluginObjects.sources") || !strings.Contains(err.Error(), "Plugin team-a/x")) {
			t.Errorf("%s: the refusal %q names neither the object nor the setting", module, err)
		}
	}
	if err := p.AllowsSource("Plugin team-a/x", "team-a", "/var/lib/wasmrec/modules/./a.wasm"); err == nil || !strings.Contains(err.Error(), `write it as "/var/lib/wasmrec/modules/a.wasm"`) {
		t.Errorf("a path inside a source, not written plainly: %v; want the plain form", err)
	}
	if err := p.AllowsSource("Plugin team-a/x", "team-a", "oci:/var/lib/wasmrec/modules//layout@sha256:ab"); err == nil || !strings.Contains(err.Error(), `write it as "oci:/var/lib/wasmrec/modules/layout@sha256:ab"`) {
		t.Errorf("a layout pinned by digest, not written plainly: %v; want the plain form, pinned alike", err)
	}
	if err := (ObjectPolicy{}).AllowsSource("Plugin a/b", "a", "oci://r/x:v1"); err == nil || !strings.Contains(err.Error(), "none yet") {
		t.Errorf("with no sources: %v; want a refusal saying none are allowed yet", err)
	}
}

func TestObjectPolicySourcesOfANamespace(t *testing.T) {
	p := ObjectPolicy{Sources: []string{"oci://registry.example.com/{namespace}/", "oci://registry.example.com/shared/"}}
	for _, c := range []struct {
		namespace, module string
		ok                bool
	}{
		{"team-a", "oci://registry.example.com/team-a/labeler:v1", true},
		{"team-a", "oci://registry.example.com/team-b/labeler:v1", false},
		{"team-a", "oci://registry.example.com/team-a/../team-b/labeler:v1", false},
		{"team-a", "oci://registry.example.com/shared/labeler:v1", true},
		{"", "oci://registry.example.com/team-a/labeler:v1", false}, // a ClusterPlugin has no namespace of its own
		{"", "oci://registry.example.com/shared/labeler:v1", true},
	} {
		err := p.AllowsSource("x", c.namespace, c.module)
		if (err == nil) != c.ok {
			t.Errorf("%q in %q: %v, want allowed %v", c.module, c.namespace, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "team-b") && !strings.Contains(c.module, "team-b") {
			t.Errorf("the refusal names another team's source: %v", err)
		}
	}
}

func TestObjectPolicyBoundsTheSettings(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	yes := true
	p := ObjectPolicy{Sources: []string{"oci://"}}
	base := Config{Name: "x", Module: "oci://r/x:v1"}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) {}, ""},
		{func(c *Config) { c.MemoryLimit = q("1Gi") }, "spec.memoryLimit 1Gi is above the operator's limit of 256Mi (pluginObjects.maxMemoryLimit"},
		{func(c *Config) { c.MaxConcurrentReconciles = 9 }, "(pluginObjects.maxConcurrentReconciles in the host config)"},
		{func(c *Config) { c.LogLimit.LinesPerSecond = 1e9 }, "spec.logLimit.linesPerSecond 1e+09 is above the operator's limit of 1000"},
		{func(c *Config) { c.LogLimit.PerReconcile = 1 << 40 }, "spec.logLimit.perReconcile"},
		{func(c *Config) { c.Writes.QPS = 1e6 }, "spec.writes.qps"},
		{func(c *Config) { c.Reads.Burst = 1e6 }, "spec.reads.burst"},
		{func(c *Config) { c.RateLimiter.QPS = 1e6 }, "spec.rateLimiter.qps"},
		{func(c *Config) { c.RateLimiter.BaseDelay = &metav1.Duration{Duration: time.Nanosecond} }, "spec.rateLimiter.baseDelay 1ns is below the host's default"},
		{func(c *Config) { c.RateLimiter.MaxDelay = &metav1.Duration{Duration: time.Nanosecond} }, "spec.rateLimiter.maxDelay 1ns is below the host's default of 16m40s"},
		{func(c *Config) { c.RateLimiter.MaxDelay = &metav1.Duration{Duration: time.Hour} }, ""},
		{func(c *Config) { c.MaxModuleSize = q("1Gi") }, "spec.maxModuleSize 1Gi is above the operator's limit of 32Mi (pluginObjects.maxModuleSize"},
		{func(c *Config) { c.MaxModuleSize = q("4Mi") }, ""},
		{func(c *Config) { c.PollInterval = &metav1.Duration{Duration: time.Millisecond} }, "spec.pollInterval 1ms is below the operator's floor of 10s"},
		{func(c *Config) { c.ResyncPeriod = &metav1.Duration{Duration: time.Second} }, "spec.resyncPeriod 1s is below the operator's floor of 1m0s (pluginObjects.minResyncPeriod"},
		{func(c *Config) { c.ResyncPeriod = &metav1.Duration{Duration: time.Hour} }, ""},
		{func(c *Config) {
			c.LogLimit.LinesPerSecond = 10
			c.Writes.QPS = 5
			c.PollInterval = &metav1.Duration{Duration: time.Minute}
		}, ""},
		{func(c *Config) { c.MaxConcurrentReconciles = 100000 }, "spec.maxConcurrentReconciles 100000 is above the operator's limit of 8"},
		{func(c *Config) { c.Timeout = &metav1.Duration{Duration: 8760 * time.Hour} }, "spec.timeout 8760h0m0s is above the operator's limit of 5m0s"},
		{func(c *Config) { c.Shards = 64 }, "spec.shards 64 is above the operator's limit of 16"},
		{func(c *Config) { c.Interruptible = &yes }, "spec.interruptible is for the operator's own plugins"},
		{func(c *Config) { c.Module = "/etc/kubernetes/token" }, "is not from a source the operator allows"},
	} {
		cfg := base
		c.change(&cfg)
		err := p.Admit("Plugin a/x", "a", cfg)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v; want %q", cfg, err, c.want)
		}
	}
	low := ObjectPolicy{Sources: []string{"oci://"}, MaxMemoryLimit: q("64Mi")}
	if err := low.Admit("Plugin a/x", "a", base); err == nil || !strings.Contains(err.Error(), "set spec.memoryLimit") {
		t.Errorf("a default memoryLimit above the operator's limit: %v", err)
	}
}
