package plugintest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/internal/testenv"
)

// module reads bin/<dir>/<name>.wasm, built by `make plugins` and `make testguests`.
func module(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "bin", dir, name+".wasm"))
	if err != nil {
		testenv.Missing(t, err, dir)
	}
	return b
}

// suite loads bin/plugins/app-c.wasm: an App (demo.wasmrec.dev/v1) gets an owned ConfigMap
// (spec.message) and Service (spec.port) and a status; a bad port is a terminal error and a
// Warning event.
func suite(t *testing.T, dir, name string, opts Options) *Suite {
	t.Helper()
	opts.CacheDir = "-"
	s, err := Load(context.Background(), module(t, dir, name), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return s
}

// run parses the cases and runs them all.
func run(t *testing.T, s *Suite, yaml string) []Outcome {
	t.Helper()
	f, err := Parse("cases.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var out []Outcome
	for _, c := range f.Cases {
		o, err := s.Run(context.Background(), c)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		out = append(out, o)
	}
	return out
}

const app = `
      - apiVersion: demo.wasmrec.dev/v1
        kind: App
        metadata: {name: web, namespace: demo-c}
        spec: {message: hi, port: 8080}`

const badApp = `
      - apiVersion: demo.wasmrec.dev/v1
        kind: App
        metadata: {name: web, namespace: demo-c}
        spec: {message: hi, port: 70000}`

func TestCasesThatPass(t *testing.T) {
	s := suite(t, "plugins", "app-c", Options{})
	outcomes := run(t, s, `
cases:
  - name: applies a configmap and a service, and writes the status
    before:`+app+`
    after:
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: web
          namespace: demo-c
          ownerReferences: [{kind: App, name: web, controller: true}]
          annotations: null
          labels: {stale: null}
        data: {message: hi}
      - apiVersion: v1
        kind: Service
        metadata: {name: web, namespace: demo-c}
        spec:
          ports: [{port: 8080}]
      - apiVersion: demo.wasmrec.dev/v1
        kind: App
        metadata: {name: web, namespace: demo-c}
        status:
          observedGeneration: 1
          conditions: [{type: Ready, status: "True"}]
    events: []
    logs: ["reconciled app=demo-c/web generation=1 port=8080"]
  - name: a bad port is a terminal error and a warning
    before:`+badApp+`
    request: {namespace: demo-c, name: web, retries: 2}
    result: {error: outside 1-65535, terminal: true}
    gone:
      - {apiVersion: v1, kind: ConfigMap, namespace: demo-c, name: web}
    events:
      - {type: Warning, reason: InvalidPort, message: "70000"}
  - name: a deleted app is not an error
    request: {namespace: demo-c, name: gone}
    result: {}
    events: []
`)
	for _, o := range outcomes {
		if !o.Passed() {
			t.Errorf("%s failed:\n%s\nlogs:\n%s", o.Case, strings.Join(o.Failures, "\n"), strings.Join(o.Logs, "\n"))
		}
	}
}

// Every kind of difference fails its case, with a message naming the field.
func TestCasesThatFail(t *testing.T) {
	s := suite(t, "plugins", "app-c", Options{})
	for _, tc := range []struct {
		name, yaml string
		want       []string // each failure, in order, as a substring
	}{
		{"a field differs", `
    before:` + app + `
    after:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: web, namespace: demo-c}, data: {message: bye}}`,
			[]string{`after[0] v1 ConfigMap demo-c/web: data.message: want "bye", got "hi"`}},
		{"a field is missing", `
    before:` + app + `
    after:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: web, namespace: demo-c, annotations: {example.com/x: "1"}}`,
			[]string{`after[0] v1 ConfigMap demo-c/web: metadata.annotations: want {"example.com/x":"1"}, got nothing`}},
		{"a string is not a number", `
    before:` + app + `
    after:
      - {apiVersion: v1, kind: Service, metadata: {name: web, namespace: demo-c}, spec: {ports: [{port: "8080"}]}}`,
			[]string{`after[0] v1 Service demo-c/web: spec.ports[0].port: want "8080", got 8080`}},
		{"a list has another length", `
    before:` + app + `
    after:
      - {apiVersion: v1, kind: Service, metadata: {name: web, namespace: demo-c}, spec: {ports: [{port: 8080}, {port: 9090}]}}`,
			[]string{`spec.ports: want 2 items, got 1`}},
		{"a field that must be absent is there", `
    before:` + app + `
    after:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: web, namespace: demo-c}, data: null}`,
			[]string{`data: want it absent, got {"message":"hi"}`}},
		{"an object is not found", `
    before:` + app + `
    after:
      - {apiVersion: v1, kind: Secret, metadata: {name: web, namespace: demo-c}}`,
			[]string{`after[0] v1 Secret demo-c/web: not found`}},
		{"an object is not gone", `
    before:` + app + `
    gone:
      - {apiVersion: v1, kind: ConfigMap, namespace: demo-c, name: web}`,
			[]string{`gone[0] v1 ConfigMap demo-c/web: still there`}},
		{"an unexpected error", `
    before:` + badApp,
			[]string{`result.error: want none, got an error: spec.port 70000 is outside 1-65535`}},
		{"no error where one is expected", `
    before:` + app + `
    result: {error: ""}`,
			[]string{`result.error: want an error, got none`}},
		{"another error", `
    before:` + badApp + `
    result: {error: not found, terminal: true}`,
			[]string{`result.error: want an error holding "not found", got: spec.port 70000 is outside 1-65535`}},
		{"a terminal error where a retried one is expected", `
    before:` + badApp + `
    result: {error: outside}`,
			[]string{`result.terminal: want an error that is retried, got a terminal one`}},
		{"a requeue that does not come", `
    before:` + app + `
    result: {requeue: true}`,
			[]string{`result.requeue: want true, got false`}},
		{"a requeueAfter that does not come", `
    before:` + app + `
    result: {requeueAfter: 1m30s}`,
			[]string{`result.requeueAfter: want 1m30s, got 0s`}},
		{"an event that is not recorded", `
    before:` + app + `
    events: [{type: Normal, reason: Applied}]`,
			[]string{`events[0]: want Normal Applied, got no such event`}},
		{"an event that is not expected", `
    before:` + badApp + `
    result: {terminal: true}
    events: []`,
			[]string{`events[0]: want no more events, got Warning InvalidPort "spec.port 70000 is not a port" about App demo-c/web`}},
		{"an event with another message", `
    before:` + badApp + `
    result: {terminal: true}
    events: [{reason: InvalidPort, message: "8080"}]`,
			[]string{`events[0]: want InvalidPort with a message holding "8080", got Warning InvalidPort`}},
		{"a log line that is not logged", `
    before:` + app + `
    logs: [reconciled, "port=9090"]`,
			[]string{`logs[1]: want a line holding "port=9090" after the line logs[0] matched, got:`, `info reconciled app=demo-c/web generation=1 port=8080`}},
		{"log lines in another order", `
    before:` + app + `
    logs: ["port=8080", "reconciled"]`,
			[]string{`logs[1]: want a line holding "reconciled"`}},
		{"several differences", `
    before:` + app + `
    result: {requeue: true}
    after:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: web, namespace: demo-c}, data: {message: bye}}
    events: [{reason: Applied}]`,
			[]string{"result.requeue", "data.message", "events[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, s, "cases:\n  - name: "+tc.name+tc.yaml+"\n")[0]
			if o.Passed() {
				t.Fatalf("passed, want it to fail with %q", tc.want)
			}
			if len(o.Failures) != len(tc.want) && len(tc.want) > 1 && !strings.HasPrefix(tc.want[0], "logs") {
				t.Errorf("failures:\n%s\nwant %d", strings.Join(o.Failures, "\n"), len(tc.want))
			}
			all := strings.Join(o.Failures, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("failures:\n%s\nwant one holding %q", all, w)
				}
			}
		})
	}
}

// A guest that traps, and one whose result asks to come back, as the host reads them.
func TestTrapsAndRequeues(t *testing.T) {
	s := suite(t, "testguests", "misbehave", Options{})
	cm := func(name string) string {
		return fmt.Sprintf(`
    before:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: %s, namespace: default, labels: {wasmrec.dev/misbehave: ""}}}`, name)
	}
	outcomes := run(t, s, `
cases:
  - name: a trap is a failed reconcile
    `+cm("trap")+`
    result: {error: trapped}
  - name: a trap where none is expected
    `+cm("trap")+`
  - name: a result asking to come back
    `+cm("unknownkinds")+`
    result: {requeueAfter: 10ms}
`)
	if !outcomes[0].Passed() || !outcomes[2].Passed() {
		t.Errorf("failures: %q, %q", outcomes[0].Failures, outcomes[2].Failures)
	}
	if f := strings.Join(outcomes[1].Failures, "\n"); !strings.Contains(f, `result.error: want none, got an error: reconcile trapped: wasm error: unreachable`) {
		t.Errorf("a trap where none is expected: %q", f)
	}
}

// A case cannot run when the host would refuse the plugin, or when its objects do not fit.
func TestCasesThatCannotRun(t *testing.T) {
	ctx := context.Background()
	narrow := suite(t, "plugins", "app-c", Options{Grant: []abi.Permission{{Group: "demo.wasmrec.dev", Resources: []string{"apps"}, Verbs: []string{"get", "list", "watch"}}}})
	f, err := Parse("cases.yaml", []byte("cases:\n  - name: x\n    before:"+app+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := narrow.Run(ctx, f.Cases[0]); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "the host would refuse this plugin: the module asks for permissions it was not granted") || !strings.Contains(err.Error(), "configmaps") {
		t.Errorf("a grant narrower than the manifest: %v", err)
	}

	s := suite(t, "plugins", "app-c", Options{})
	for _, tc := range []struct{ yaml, want string }{
		{`
    before:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}`, `before[0]: v1 ConfigMap "cm" is namespaced: give it a namespace`},
		{`
    before:
      - {apiVersion: demo.wasmrec.dev/v1, kind: App, metadata: {name: a, namespace: demo-c}}
      - {apiVersion: demo.wasmrec.dev/v1, kind: App, metadata: {name: b, namespace: demo-c}}`, `request: before holds 2 objects of the plugin's kind (demo.wasmrec.dev/v1 App): say which`},
	} {
		f, err := Parse("cases.yaml", []byte("cases:\n  - name: x"+tc.yaml+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Run(ctx, f.Cases[0]); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// A mistake in a file is named by the file, the line, the case and the field.
func TestBadFiles(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"cases:\n  - name: marks\n    rsult: {}\n", `tests/x.yaml: line 3: cases[0] (marks): unknown field "rsult": did you mean "result"?`},
		{"cases:\n  - name: marks\n    result: {requeueAfter: soon}\n", `tests/x.yaml: line 3: cases[0] (marks).result.requeueAfter: "soon" is not a duration`},
		{"cases:\n  - name: marks\n    events: {reason: X}\n", `tests/x.yaml: line 3: cases[0] (marks).events: a mapping is not a list`},
		{"cases:\n  - name: marks\n    result: {requeue: yes please}\n", `line 3: cases[0] (marks).result.requeue: "yes please" is not true or false`},
		{"cases:\n  - name: marks\n    request: {namespace: default}\n", `tests/x.yaml: cases[0] (marks).request: name is missing`},
		{"cases:\n  - name: marks\n    before:\n      - {apiVersion: v1, metadata: {name: x}}\n", `tests/x.yaml: cases[0] (marks).before[0]: kind missing`},
		{"cases:\n  - name: marks\n    after:\n      - {kind: ConfigMap}\n", `tests/x.yaml: cases[0] (marks).after[0]: apiVersion, metadata.name missing`},
		{"cases:\n  - name: marks\n    gone: [{kind: ConfigMap, name: x}]\n", `tests/x.yaml: cases[0] (marks).gone[0]: name an object with apiVersion`},
		{"cases:\n  - name: marks\n    events: [{type: Info, reason: X}]\n", `tests/x.yaml: cases[0] (marks).events[0].type: "Info": use Normal or Warning`},
		{"cases:\n  - name: marks\n    events: [{type: Normal}]\n", `tests/x.yaml: cases[0] (marks).events[0]: reason is missing`},
		{"cases:\n  - name: marks\n    before:\n      - {apiVersion: v1, kind: Configmap, metadata: {name: x}}\n", `tests/x.yaml: cases[0] (marks).before[0]: kind: v1 has no kind Configmap: did you mean ConfigMap?`},
		{"cases:\n  - name: a\n  - name: a\n", `tests/x.yaml: cases[1] (a): another case has this name`},
		{"cases:\n  - before: []\n", `tests/x.yaml: cases[0]: a case needs a name`},
		{"cases: []\n", `tests/x.yaml: no cases`},
		{"cases:\n  - name: e\n    explore: {changes: [{}]}\n", `tests/x.yaml: cases[0] (e).explore.changes[0]: give exactly one of put (an object) and delete (a reference)`},
		{"cases:\n  - name: e\n    explore: {changes: [{delete: {kind: Widget, name: w}}]}\n", `cases[0] (e).explore.changes[0].delete: name an object with apiVersion`},
		{"cases:\n  - name: e\n    explore: {faults: [{type: crash}]}\n", `cases[0] (e).explore.faults[0].reconcile: give the reconcile of the crash, counted from 1`},
		{"cases:\n  - name: e\n    explore: {faults: [{type: crsh, reconcile: 1}]}\n", `cases[0] (e).explore.faults[0].type: "crsh": use crash, stale, conflict or coalesce`},
		{"cases:\n  - name: e\n    explore: {faults: [{type: coalesce, change: 1}]}\n", `cases[0] (e).explore.faults[0].change: 1: give a change (from 1) that has one after it; there are 0`},
		{"cases:\n  - name: e\n    explore: {faults: [{type: stale, reconcile: 2}]}\n", `cases[0] (e).explore.faults[0].object: a stale read names the object read`},
		{"cases:\n  - name: e\n    explore: {faults: [{type: crash, reconcile: 1, read: 3}]}\n", `cases[0] (e).explore.faults[0]: a crash fault takes no read: give reconcile and afterWrites`},
		{"cases:\n  - name: e\n    request: {name: x}\n    explore: {}\n", `cases[0] (e).explore: an exploring case reconciles every object of the plugin's kind: request, result, events and logs do not apply`},
		{"cases:\n  - name: x\n   before: []\n", `tests/x.yaml: line 1: did not find expected '-' indicator: the YAML does not parse`},
	} {
		_, err := Parse("tests/x.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %q", tc.yaml, err, tc.want)
		}
	}
}

// The example of docs/plugin-authors.md, "Testing without a cluster", passes: it is a test of
// plugins/app-c.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/plugin-authors.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Testing without a cluster")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`docs/plugin-authors.md has no yaml block under "## Testing without a cluster"`)
	}
	s := suite(t, "plugins", "app-c", Options{})
	outcomes := run(t, s, block)
	if len(outcomes) < 2 {
		t.Errorf("the example has %d cases", len(outcomes))
	}
	for _, o := range outcomes {
		if !o.Passed() {
			t.Errorf("%s failed:\n%s", o.Case, strings.Join(o.Failures, "\n"))
		}
	}
}

// A request outside the plugin's namespaces fails the case: the host never reconciles it.
func TestRequestOutsideTheNamespaces(t *testing.T) {
	s := suite(t, "plugins", "app-c", Options{Namespaces: []string{"other"}})
	o := run(t, s, "cases:\n  - name: outside\n    before:"+app+"\n")[0]
	if o.Passed() || len(o.Failures) != 1 || !strings.Contains(o.Failures[0], "request: demo-c/web is outside the plugin's namespaces [other]: the host never reconciles it") {
		t.Fatalf("failures %q", o.Failures)
	}
}
