package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// SIGTERM during a slow reconcile: the host stops taking work, lets the reconcile finish, and
// exits 0 well within its graceful-shutdown timeout.
func TestSIGTERMLetsAReconcileFinish(t *testing.T) {
	bin, err := filepath.Abs("../bin/wasmrec")
	must(t, err)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: run `make build`", err)
	}
	ns := namespace(t)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), cp.Kubeconfig, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "host.yaml"), fmt.Appendf(nil, `plugins:
  - name: misbehave
    module: %s
    namespaces: [%s]
    permissions:
      - {group: "", resources: [configmaps], verbs: [get, list, watch]}
`, wasmFile(t, "testguests", "misbehave"), ns), 0o600))

	var out lockedBuffer
	cmd := exec.Command(bin, "run", "--config", filepath.Join(dir, "host.yaml"), "--kubeconfig", filepath.Join(dir, "kubeconfig"))
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	waitOut := func(what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the output after 60s:\n%s", what, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitOut(`msg="starting workers" plugin=misbehave`)
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "sleep", Labels: map[string]string{"wasmrec.dev/misbehave": "yes"}}}, metav1.CreateOptions{})
	must(t, err)
	waitOut(`msg=sleeping`)

	signalled := time.Now()
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("exited with %v:\n%s", err, out.String())
		}
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after SIGTERM:\n%s", out.String())
	}
	log := out.String()
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
	t.Logf("exited 0 %s after SIGTERM, once the 2s reconcile had finished", took.Round(time.Millisecond))
}
