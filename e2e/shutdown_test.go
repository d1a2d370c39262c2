package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmrec/wasmrec/internal/testenv"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// hostProcess is `wasmrec run` started by a test, with its output.
type hostProcess struct {
	cmd    *exec.Cmd
	out    lockedBuffer
	exited chan error
}

// startHost runs bin/wasmrec run with config (a host config's YAML) and args against the test's
// API server. It is killed at the end of the test if it is still running.
func startHost(t testing.TB, config string, args ...string) *hostProcess {
	t.Helper()
	bin, err := filepath.Abs("../bin/wasmrec")
	must(t, err)
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, err, "build")
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), cp.Kubeconfig, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "host.yaml"), []byte(config), 0o600))
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--metrics-auth") }) {
		// Tests that scrape to see what a host does scrape as anyone; TestMetricsNeedAReviewedToken
		// runs the default.
		args = append(args, "--metrics-auth=false")
	}
	h := &hostProcess{exited: make(chan error, 1)}
	h.cmd = exec.Command(bin, append([]string{"run", "--config", filepath.Join(dir, "host.yaml"), "--kubeconfig", filepath.Join(dir, "kubeconfig")}, args...)...)
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	must(t, h.cmd.Start())
	go func() { h.exited <- h.cmd.Wait() }()
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			<-h.exited
		}
	})
	return h
}

// waitOut waits until the output holds what.
func (h *hostProcess) waitOut(t testing.TB, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(h.out.String(), what) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after 60s:\n%s", what, h.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// terminate sends SIGTERM and waits (at most 30 s) for an exit 0.
func (h *hostProcess) terminate(t testing.TB) {
	t.Helper()
	must(t, h.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-h.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("exited with %v:\n%s", err, h.out.String())
		}
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after SIGTERM:\n%s", h.out.String())
	}
}

// misbehaving creates ConfigMaps in ns for the misbehave guest, which acts by their names.
func misbehaving(t testing.TB, ns string, names ...string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, name := range names {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"wasmrec.dev/misbehave": "yes"}}}, metav1.CreateOptions{})
		must(t, err)
	}
}

// misbehaveConfig is a host config running the misbehave guest in ns with workers workers.
func misbehaveConfig(t testing.TB, ns string, workers int) string {
	return fmt.Sprintf(`plugins:
  - name: misbehave
    module: %s
    namespaces: [%s]
    maxConcurrentReconciles: %d
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch]}
`, wasmFile(t, "testguests", "misbehave"), ns, workers)
}

// SIGTERM during a slow reconcile: the host stops taking work, lets the reconcile finish, and
// exits 0 well within its graceful-shutdown timeout.
func TestSIGTERMLetsAReconcileFinish(t *testing.T) {
	ns := namespace(t)
	h := startHost(t, misbehaveConfig(t, ns, 1))
	waitOut := func(what string) { t.Helper(); h.waitOut(t, what) }
	waitOut(`msg="starting workers" plugin=misbehave`)
	misbehaving(t, ns, "sleep")
	waitOut(`msg=sleeping`)

	signalled := time.Now()
	h.terminate(t)
	log := h.out.String()
	took := time.Since(signalled)
	if !strings.Contains(log, "msg=slept") {
		t.Fatalf("the in-flight reconcile did not finish:\n%s", log)
	}
	if strings.Contains(log, "level=ERROR") {
		t.Fatalf("errors while stopping:\n%s", log)
	}
	if i, j := strings.Index(log, "stopping the manager"), strings.Index(log, "msg=slept"); i < 0 || j < i {
		t.Fatalf("the reconcile did not run on after the stop began:\n%s", log)
	}
	t.Logf("exited 0 %s after SIGTERM, once the reconcile, its sleep cut short, had finished", took.Round(time.Millisecond))
}

// A guest asleep in WASI for 20 s under a 3 s timeout is cut at its timeout (it holds its
// worker about 3 s, and the error names the timeout), and SIGTERM during its sleep (its retry)
// ends the sleep at once: the host exits 0 within a second, not after the sleep or the
// graceful-shutdown timeout.
func TestSleepingGuestIsCutAtItsTimeoutAndAtSIGTERM(t *testing.T) {
	ns := namespace(t)
	h := startHost(t, misbehaveConfig(t, ns, 1)+"    timeout: 3s\n")
	h.waitOut(t, `msg="starting workers" plugin=misbehave`)
	misbehaving(t, ns, "sleep-20")
	h.waitOut(t, `msg=sleeping`)
	slept := time.Now()
	h.waitOut(t, `reconcile timed out after 3s`)
	if took := time.Since(slept); took < 2500*time.Millisecond || took > 4*time.Second {
		t.Fatalf("a 20 s sleep under a 3 s timeout ended after %s:\n%s", took.Round(time.Millisecond), tail(h.out.String(), 10))
	}
	cut := time.Since(slept)
	// The retry sleeps again; SIGTERM 1 s into it.
	for strings.Count(h.out.String(), "msg=sleeping") < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second)
	signalled := time.Now()
	h.terminate(t)
	took := time.Since(signalled)
	if took > time.Second {
		t.Fatalf("exited %s after SIGTERM during a 20 s sleep, want within a second:\n%s", took.Round(time.Millisecond), tail(h.out.String(), 10))
	}
	t.Logf("the 20 s sleep was cut %s in (timeout 3s); SIGTERM 1 s into the retry's sleep exited 0 in %s", cut.Round(time.Millisecond), took.Round(time.Millisecond))
}

// A plugin whose module is not there when the host starts is reported, the others run, and it
// is tried again with backoff: once the module appears it loads, without a restart.
func TestRunLoadsAPluginOnceItsModuleAppears(t *testing.T) {
	ns := namespace(t)
	late := filepath.Join(t.TempDir(), "late.wasm")
	h := startHost(t, fmt.Sprintf(`plugins:
  - name: misbehave
    module: %[1]s
    namespaces: [%[3]s]
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch]}
  - name: late
    module: %[2]s
    namespaces: [%[3]s]
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch]}
`, wasmFile(t, "testguests", "misbehave"), late, ns))
	h.waitOut(t, `msg="plugin not loaded; the others run, and it is tried again" plugin=late logger=plugin err="plugin \"late\": reading its module`)
	h.waitOut(t, `msg="starting workers" plugin=misbehave`)
	// The retry after 1 s fails too; the next is 2 s away, but the module's appearance wakes it.
	h.waitOut(t, `msg="plugin still not loaded; trying again" plugin=late logger=plugin err="plugin \"late\": reading its module`)
	writeModule(t, late, mustRead(t, wasmFile(t, "testguests", "misbehave")))
	written := time.Now()
	h.waitOut(t, `msg="plugin loaded" plugin=late`)
	if took := time.Since(written); took > time.Second {
		t.Errorf("the plugin loaded %s after its module appeared, want it at once, not at its next retry", took.Round(time.Millisecond))
	}
	h.waitOut(t, `msg="starting workers" plugin=late`)
	h.terminate(t)
}

// A host whose only plugin has no module yet, not even its folder, keeps running and retries,
// as run --help says; it does not exit, and loads the module once it is written.
func TestRunWaitsForItsOnlyPluginsModule(t *testing.T) {
	ns := namespace(t)
	late := filepath.Join(t.TempDir(), "not-yet", "late.wasm")
	h := startHost(t, fmt.Sprintf(`plugins:
  - name: late
    module: %s
    namespaces: [%s]
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch]}
`, late, ns))
	h.waitOut(t, `msg="plugin not loaded; the others run, and it is tried again" plugin=late`)
	h.waitOut(t, `msg="plugin still not loaded; trying again" plugin=late`)
	select {
	case err := <-h.exited:
		t.Fatalf("the host exited (%v) while its only plugin's module was missing:\n%s", err, h.out.String())
	default:
	}
	must(t, os.MkdirAll(filepath.Dir(late), 0o755))
	writeModule(t, late, mustRead(t, wasmFile(t, "testguests", "misbehave")))
	h.waitOut(t, `msg="starting workers" plugin=late`)
	h.terminate(t)
}

// SIGTERM with hundreds of keys queued: the host takes no more of them, lets the in-flight
// reconciles finish, and exits 0 at once; the keys it dropped are not lost, since a restarted
// host lists every object again and reconciles it.
func TestSIGTERMWithAQueueStopsAtOnce(t *testing.T) {
	const objects, workers = 500, 10
	ns := namespace(t)
	var naps []string
	for i := range objects {
		naps = append(naps, fmt.Sprintf("nap-%03d", i))
	}
	misbehaving(t, ns, naps...)
	config := misbehaveConfig(t, ns, workers)
	h := startHost(t, config)
	h.waitOut(t, "msg=\"napped nap-")
	time.Sleep(300 * time.Millisecond) // a few rounds of naps: most keys are still queued
	signalled := time.Now()
	h.terminate(t)
	took := time.Since(signalled)
	out := h.out.String()
	// Counted from the host's own line, not from when the test sent the signal: on a busy
	// machine a round of naps can end before the signal arrives.
	stop := strings.Index(out, "stopping the manager")
	if stop < 0 {
		t.Fatalf("no \"stopping the manager\" line:\n%s", tail(out, 20))
	}
	before, after := strings.Count(out[:stop], "napped nap-"), strings.Count(out[stop:], "napped nap-")
	if after > workers {
		t.Errorf("%d reconciles finished after the stop began, want at most the %d in flight", after, workers)
	}
	if took > 5*time.Second {
		t.Errorf("exited %s after SIGTERM, want a few seconds at most", took.Round(time.Millisecond))
	}
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("errors while stopping:\n%s", tail(out, 40))
	}
	if !strings.Contains(out, "droppedQueuedKeys=") {
		t.Errorf("the stop does not say how many queued keys it dropped:\n%s", tail(out, 20))
	}
	t.Logf("exited 0 %s after SIGTERM; %d of %d objects reconciled before it, %d after", took.Round(time.Millisecond), before, objects, after)

	again := startHost(t, config)
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < objects; {
		if strings.Contains(again.out.String(), fmt.Sprintf("napped nap-%03d", i)) {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted host did not reconcile nap-%03d within a minute", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	again.terminate(t)
}

// A second SIGTERM while the host waits for a reconcile exits at once, non-zero, and names
// what was still running.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	ns := namespace(t)
	h := startHost(t, misbehaveConfig(t, ns, 1))
	h.waitOut(t, `msg="starting workers" plugin=misbehave`)
	misbehaving(t, ns, "spin") // a sleep would end at the first SIGTERM: the host wakes it
	h.waitOut(t, "msg=spinning")
	// The same request twice at once (timeout(1) signals the process and its group) is one.
	must(t, h.cmd.Process.Signal(syscall.SIGTERM))
	must(t, h.cmd.Process.Signal(syscall.SIGTERM))
	h.waitOut(t, "stopping workers")
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-h.exited:
		t.Fatalf("two signals at once stopped the host at once (%v):\n%s", err, h.out.String())
	default:
	}
	if strings.Contains(h.out.String(), "exiting at once") {
		t.Fatalf("two signals at once stopped the host at once:\n%s", h.out.String())
	}
	signalled := time.Now()
	must(t, h.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-h.exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit: %v, want status %d:\n%s", err, 128+int(syscall.SIGTERM), h.out.String())
		}
	case <-time.After(time.Second):
		t.Fatalf("still running 1s after the second SIGTERM:\n%s", h.out.String())
	}
	out := h.out.String()
	if !strings.Contains(out, "exiting at once; reconciles in flight: misbehave "+ns+"/spin (for ") || !strings.Contains(out, "; still stopping: misbehave") || strings.Contains(out, "*plugin.") {
		t.Fatalf("the exit does not name what was running:\n%s", tail(out, 10))
	}
	t.Logf("exited %s after the second SIGTERM: %s", time.Since(signalled).Round(time.Millisecond), out[strings.LastIndex(out, "wasmrec: "):])
}
