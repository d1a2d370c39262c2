package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// TestFailuresInTheAuthorsWords is an author's plugin failing as plugins do, under `wasmrec dev`,
// and what the author is told: a panic is the error line's message with the guest's stack beside
// it, not a wasm trap; a reconcile that loops is stopped at its timeout and the error names the
// setting and its value; a plugin failing every reconcile is Degraded with the last error until
// one succeeds; a kind misspelt is not Ready, and says which served kind was meant.
func TestFailuresInTheAuthorsWords(t *testing.T) {
	t.Parallel() // see e2e/doc.go: what may run beside others
	if testing.Short() {
		t.Skip("builds plugins and starts a control plane")
	}
	a := newAuthor(t)
	a.run("", "wasmrec new oops --for v1/ConfigMap")
	a.edit("oops/host.yaml", "    module: oops.wasm\n", "    module: oops.wasm\n    timeout: 2s\n")
	a.run("", "wasmrec new widgets --for e2e.wasmrec.dev/v1/Widget") // with crds/, a CRD of Widget
	a.edit("widgets/main.go", `Kind: "Widget"`, `Kind: "Widgt"`)
	// wasmrec build checks the kinds against the folder's CRDs.
	if out := a.fails("widgets", "wasmrec build"); !strings.Contains(out, "watches Widgt.v1.e2e.wasmrec.dev, which crds/*.yaml do not define: did you mean Widget?") {
		t.Errorf("wasmrec build of a misspelt kind says:\n%s", out)
	}

	d := startDev(t, a, "", "--plugin", "./oops", "--plugin", "./widgets")
	c, err := clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	must(t, err)
	dc, err := dynamic.NewForConfig(c)
	must(t, err)
	waitCond := func(name, typ, status, reason, msg string) {
		t.Helper()
		var got map[string]any
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			if u, err := dc.Resource(pluginGVR).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
				conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				for _, c := range conds {
					if m, _ := c.(map[string]any); m["type"] == typ {
						got = m
					}
				}
				if got["status"] == status && got["reason"] == reason && strings.Contains(got["message"].(string), msg) {
					return
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("ClusterPlugin %s: %s is %v after 90s, want %s %s with %q\ndev's output:\n%s", name, typ, got, status, reason, msg, tail(d.output(), 60))
	}
	// waitLine waits for a line of dev's output, after the first skip bytes, that has every one of
	// want, and returns it.
	waitLine := func(skip int, want ...string) string {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			for _, l := range strings.Split(d.output()[skip:], "\n") {
				if containsAll(l, want...) {
					return l
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("no line of dev's output with %q after 90s:\n%s", want, tail(d.output()[skip:], 60))
		return ""
	}
	waitCond("oops", "Degraded", "False", "Healthy", "")

	// A kind misspelt: not Ready, saying which kind its group serves; the log says so at ERROR.
	waitCond("widgets", "Ready", "False", "WaitingForKinds", "Widgt.v1.e2e.wasmrec.dev (no CRD serves it: did you mean Widget, which e2e.wasmrec.dev serves?)")
	waitLine(0, "level=ERROR", "waiting for a kind no API serves", "did you mean Widget")

	// A panic: the error line says the guest's message, with its stack, and no wasm trap; and
	// since every reconcile panics, the plugin is Degraded with it.
	mark := len(d.output())
	a.edit("oops/main.go", "	var obj ", "	panic(\"the sample has no owner\")\n	var obj ")
	line := waitLine(mark, "level=ERROR", `panicked: the sample has no owner`)
	if !strings.Contains(line, `stack="goroutine `) || !strings.Contains(line, "main.(*Reconciler).Reconcile") {
		t.Errorf("the panic's line lacks the guest's stack:\n%s", line)
	}
	if strings.Contains(line, "wasm error") || strings.Contains(line, "unreachable") {
		t.Errorf("the panic's line reads as a wasm trap:\n%s", line)
	}
	waitCond("oops", "Degraded", "True", "ReconcilesFailing", "panicked: the sample has no owner")

	// A reconcile that never returns: stopped at the plugin's timeout, which the error names.
	mark = len(d.output())
	a.edit("oops/main.go", "	panic(\"the sample has no owner\")\n", "	for n := 0; ; n++ {\n	}\n")
	line = waitLine(mark, "level=ERROR", "reconcile timed out after 2s, the plugin's timeout (timeout in host.yaml")
	if strings.Contains(line, "wasm error") {
		t.Errorf("the timeout's line reads as a wasm trap:\n%s", line)
	}

	// Fixed: one reconcile succeeds, and the plugin is healthy again.
	a.edit("oops/main.go", "	for n := 0; ; n++ {\n	}\n", "")
	waitCond("oops", "Degraded", "False", "Healthy", "")
	d.stop(t)
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
