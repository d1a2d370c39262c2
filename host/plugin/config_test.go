package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A host config's mistakes are said with the file, the line, the plugin (by name, or by index
// when it has none), the field, the value and the form the field takes.
func TestBadHostConfigsSayWhereWhatAndHow(t *testing.T) {
	const head = "plugins:\n  - name: app\n    module: app.wasm\n"
	for _, tc := range []struct {
		name, config string
		want         []string // every one in the message
	}{
		{"a duration", head + "    timeout: banana\n", []string{"line 4", "plugins[0] (app).timeout", `"banana" is not a duration`, "like 30s"}},
		{"a number of shards in quotes", head + "    shards: \"3\"\n", []string{"line 4", "plugins[0] (app).shards", `"3" is not a whole number`, "unquoted, like 3"}},
		{"workers in words", head + "    maxConcurrentReconciles: two\n", []string{"plugins[0] (app).maxConcurrentReconciles", `"two" is not a whole number`}},
		{"a misspelt field", head + "    maxConcurentReconciles: 2\n", []string{"line 4", "plugins[0] (app)", `unknown field "maxConcurentReconciles"`, `did you mean "maxConcurrentReconciles"?`}},
		{"a field of nothing like", head + "    colour: blue\n", []string{`unknown field "colour"`, "the fields here are", "maxConcurrentReconciles"}},
		{"a misspelt top-level field", "plugin:\n  - name: app\n", []string{"line 1", "the top level", `did you mean "plugins"?`}},
		{"a plugin without a name", "plugins:\n  - module: app.wasm\n    timout: 3s\n", []string{"line 3", "plugins[0]", `did you mean "timeout"?`}},
		{"the second plugin", head + "  - name: other\n    module: o.wasm\n    memoryLimit: lots\n", []string{"line 6", "plugins[1] (other).memoryLimit", `"lots" is not a quantity`, "like 128Mi"}},
		{"interruptible as a word", head + "    interruptible: maybe\n", []string{"plugins[0] (app).interruptible", "is not true or false"}},
		{"snapshots as a word", head + "    snapshots: no-thanks\n", []string{"plugins[0] (app).snapshots", "is not true or false"}},
		{"a misspelt snapshots", head + "    snapshot: false\n", []string{`did you mean "snapshots"?`}},
		{"a permission's verbs", head + "    permissions:\n      - {resources: [configmaps], verbs: get}\n", []string{"line 5", "plugins[0] (app).permissions[0].verbs", "is not a list"}},
		{"a misspelt permission field", head + "    permissions:\n      - {resource: [configmaps], verbs: [get]}\n", []string{"plugins[0] (app).permissions[0]", `did you mean "resources"?`}},
		{"rates", head + "    writes: {qps: fast}\n", []string{"plugins[0] (app).writes.qps", `"fast" is not a number`}},
		{"a rollout duration", head + "    rollout: {shadow: {duration: soon}}\n", []string{"plugins[0] (app).rollout.shadow.duration", `"soon" is not a duration`}},
		{"a rollout typo", head + "    rollout: {shadow: {duraton: 1m}}\n", []string{"plugins[0] (app).rollout.shadow", `did you mean "duration"?`}},
		{"a tolerance in percent", head + "    rollout: {shadow: {}, analysis: {tolerance: {errors: 5%}}}\n", []string{"plugins[0] (app).rollout.analysis.tolerance.errors", `"5%" is not a number`, "a fraction"}},
		{"canary steps as a word", head + "    rollout: {canary: {steps: half}}\n", []string{"plugins[0] (app).rollout.canary.steps", "is not a list"}},
		{"a negative idle timeout", head + "    idleTimeout: -1m\n", []string{"line 4: plugins[0]", `plugin "app": idleTimeout -1m0s: use 1s or more`, "0s keeps idle instances"}},
		{"a record mode", head + "  - name: other\n    module: o.wasm\n    record: {mode: x}\n", []string{"line 6: plugins[1]", `record.mode "x": use none, failures, sample or all`}},
		{"two mistakes of its recording", head + "    record: {mode: sample, sample: 1.5, maxBytes: -1}\n", []string{"host.yaml: line 4: plugins[0]: plugin \"app\": record.sample 1.5", "host.yaml: line 4: plugins[0]: plugin \"app\": record.maxBytes -1"}},
		{"a record mode in a block", head + "    record:\n      maxBytes: 1Mi\n      mode: x\n", []string{"host.yaml: line 6: plugins[0]", `record.mode "x"`}},
		{"two mistakes of one plugin", head + "    timeout: -1s\n    record: {mode: x}\n", []string{"host.yaml: line 4: plugins[0]: plugin \"app\": timeout -1s: use a positive duration", "host.yaml: line 5: plugins[0]: plugin \"app\": record.mode \"x\""}},
		{"a plugin without a module", "plugins:\n  - name: app\n    timeout: 3s\n", []string{"line 2: plugins[0]", "module is required"}},
		{"a name used twice", head + "  - name: app\n    module: o.wasm\n", []string{"line 4: plugins[1]", `name "app" is used twice`}},
		{"two mistakes", head + "    timeout: -1s\n  - name: Other\n    module: o.wasm\n", []string{"host.yaml: line 4: plugins[0]", "timeout -1s: use a positive duration", "host.yaml: line 5: plugins[1]", `name "Other"`}},
		{"the namespace to impersonate in", "impersonate: {namespace: A_B}\n" + head, []string{"line 1: impersonate.namespace", "give the namespace"}},
		{"a memory limit past what wasm addresses", head + "    memoryLimit: 5Gi\n", []string{`plugin "app": memoryLimit 5Gi is above 4Gi`}},
		{"a recycle bound above the limit", head + "    memoryLimit: 64Mi\n    recycleAbove: 100Mi\n", []string{`plugin "app": recycleAbove 100Mi is above the memoryLimit 64Mi`}},
		{"a recycle bound above the default limit", head + "    recycleAbove: 200Mi\n", []string{`plugin "app": recycleAbove 200Mi is above the memoryLimit 128Mi`}},
		{"a code idle timeout of a moment", head + "    codeIdleTimeout: 10ms\n", []string{`plugin "app": codeIdleTimeout 10ms: use 1s or more`}},
		{"a resync period of a moment", head + "    resyncPeriod: 10ms\n", []string{`plugin "app": resyncPeriod 10ms: use 1s or more`}},
		{"a duration without a unit", head + "    timeout: 30\n", []string{"plugins[0] (app).timeout", "30 is not a duration", "like 30s"}},
		{"plugins as a mapping", "plugins:\n  app: {module: a.wasm}\n", []string{"line 2", "plugins", "is not a list"}},
		{"the object policy", head + "pluginObjects: {memoryBudget: huge}\n", []string{"pluginObjects.memoryBudget", `"huge" is not a quantity`}},
		{"signatures", head + "signatures: {key: [a.pub]}\n", []string{"signatures", `did you mean "keys"?`}},
		{"a YAML syntax error", head + "    timeout: 3s: 4\n", []string{"line 4", "mapping values are not allowed", "the YAML does not parse", "indentation"}},
	} {
		path := filepath.Join(t.TempDir(), "host.yaml")
		if err := os.WriteFile(path, []byte(tc.config), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadHostConfig(path)
		if err == nil {
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		msg := err.Error()
		for _, w := range append([]string{path}, tc.want...) {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q\n  does not say %q", tc.name, msg, w)
			}
		}
	}
}

// idleTimeout: unset is the engine's default, 0s never, anything else itself.
func TestIdleTimeoutSetting(t *testing.T) {
	for _, tc := range []struct {
		in   *metav1.Duration
		want time.Duration
	}{
		{nil, 0},
		{&metav1.Duration{}, -1},
		{&metav1.Duration{Duration: 10 * time.Minute}, 10 * time.Minute},
	} {
		if got := idleTimeout(tc.in); got != tc.want {
			t.Errorf("idleTimeout(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// snapshots: false in a plugin's config reaches its module; unset, the module's default.
func TestSnapshotsSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.yaml")
	if err := os.WriteFile(path, []byte("plugins:\n  - name: a\n    module: a.wasm\n    snapshots: false\n  - name: b\n    module: b.wasm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadHostConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	a := (&Plugin{cfg: cfg.Plugins[0]}).moduleOptions().Snapshots
	b := (&Plugin{cfg: cfg.Plugins[1]}).moduleOptions().Snapshots
	if a == nil || *a || b != nil {
		t.Errorf("snapshots: a %v, b %v; want false and unset", a, b)
	}
}

// A plugin's error message is kept to 1 KiB, cut at a rune, saying how much was cut: 64 KiB
// errors under a retry of every few milliseconds filled the host's log.
func TestErrorTextIsClipped(t *testing.T) {
	if got := clip("short"); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
	long := strings.Repeat("é", 40<<10) // 2 bytes a rune: 80 KiB
	got := clip(long)
	if len(got) > maxErrorText+40 || !strings.HasSuffix(got, "bytes more)") || !utf8.ValidString(got) {
		t.Errorf("clip of 80 KiB: %d bytes, ends %q", len(got), got[len(got)-30:])
	}
}
