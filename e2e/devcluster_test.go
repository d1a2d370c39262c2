package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// devEventually polls f every 200ms until it returns nil, or fails the test after timeout with
// what it waited for, f's last error and dev's output.
func devEventually(t *testing.T, d *devProcess, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (%v)\ndev's output:\n%s", what, timeout, err, d.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDevIsASmallCluster: `wasmrec dev --plugin .`, as an author runs it, has a garbage
// collector (a ConfigMap owned by another goes when its owner is deleted, and one whose owner
// stays, stays), namespaces that finish deleting, and ServiceAccount tokens; and
// kube-controller-manager's log goes to a file, not to dev's output.
func TestDevIsASmallCluster(t *testing.T) {
	t.Parallel() // see e2e/doc.go: a control plane of its own
	if testing.Short() {
		t.Skip("builds a plugin and starts a control plane")
	}
	a := newAuthor(t)
	a.run("", "wasmrec new hello --for v1/ConfigMap")
	// A plugin of two namespaces, one the new control plane lacks: dev makes it.
	hostYAML := filepath.Join(a.home, "hello", "host.yaml")
	b, err := os.ReadFile(hostYAML)
	must(t, err)
	must(t, os.WriteFile(hostYAML, bytes.Replace(b, []byte("namespaces: [default]"), []byte("namespaces: [default, team-b]"), 1), 0o644))
	dev := startDev(t, a, "hello")
	cs := dev.client(t)
	ctx := context.Background()
	devEventually(t, dev, time.Minute, "dev makes the plugin's namespace team-b, saying so", func() error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "team-b", metav1.GetOptions{})
		if err == nil && !strings.Contains(dev.output(), `created namespace team-b, one of plugin "hello"'s in its host.yaml`) {
			err = fmt.Errorf("dev does not say it made it")
		}
		return err
	})

	ns := "owned"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	// Two owners, each with a copy that names it as owner (as a plugin's owned copy does).
	owned := func(owner string) {
		t.Helper()
		src, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		must(t, err)
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:            owner + "-copy",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: src.Name, UID: src.UID}},
		}, Data: src.Data}, metav1.CreateOptions{})
		must(t, err)
	}
	owned("source")
	owned("kept")
	deleted := time.Now()
	must(t, cs.CoreV1().ConfigMaps(ns).Delete(ctx, "source", metav1.DeleteOptions{}))
	devEventually(t, dev, time.Minute, "the garbage collector deletes source-copy once source is gone", func() error {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "source-copy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("source-copy is still there (get: %v)", err)
		}
		return nil
	})
	t.Logf("source-copy deleted %s after source", time.Since(deleted).Round(100*time.Millisecond))
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kept-copy", metav1.GetOptions{}); err != nil {
		t.Errorf("kept-copy, whose owner stays: %v", err)
	}

	// ServiceAccounts: each namespace's default one, and a token Secret filled in.
	devEventually(t, dev, time.Minute, "namespace "+ns+" gets its default ServiceAccount", func() error {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{})
	must(t, err)
	devEventually(t, dev, time.Minute, "the token Secret is filled in", func() error {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, "token", metav1.GetOptions{})
		if err == nil && (len(s.Data[corev1.ServiceAccountTokenKey]) == 0 || len(s.Data[corev1.ServiceAccountRootCAKey]) == 0) {
			err = fmt.Errorf("its data holds %v", slices.Sorted(maps.Keys(s.Data)))
		}
		return err
	})

	// A namespace deleted, with what it holds, is gone.
	must(t, cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	devEventually(t, dev, time.Minute, "namespace "+ns+" finishes deleting", func() error {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("it is %s", n.Status.Phase)
	})

	dev.stop(t)
	out := dev.output()
	log := filepath.Join(a.cache, "wasmrec", "dev.kube-controller-manager.log")
	if !strings.Contains(out, "kube-controller-manager logs to "+log) {
		t.Errorf("dev does not say where kube-controller-manager logs (%s):\n%s", log, out)
	}
	if b, err := os.ReadFile(log); err != nil || !bytes.Contains(b, []byte("Garbage collector")) {
		t.Errorf("kube-controller-manager's log %s: %v; holds the garbage collector's lines: %t", log, err, bytes.Contains(b, []byte("Garbage collector")))
	}
	if strings.Contains(out, "garbagecollector.go") || strings.Contains(out, "Garbage collector") {
		t.Errorf("kube-controller-manager's log is in dev's output:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "level=ERROR") {
			t.Errorf("dev logged an error:\n%s", l)
		}
	}
	if last := lastLine(out); !strings.Contains(last, "msg=stopped") {
		t.Errorf("dev's last line is %q, want the final \"stopped\"", last)
	}
}

// TestDevOnAnExistingCluster: `wasmrec dev --kubeconfig FILE --plugin .` runs the plugin against
// a control plane already running (another dev's, started for replicas of one's own), makes no
// Plugin objects or ServiceAccounts there, and on Ctrl-C exits cleanly, leaving that control
// plane running with what it applied.
func TestDevOnAnExistingCluster(t *testing.T) {
	t.Parallel() // see e2e/doc.go: a control plane of its own
	if testing.Short() {
		t.Skip("builds a plugin and starts a control plane")
	}
	a := newAuthor(t)
	cluster := startDev(t, a, "", "--examples=false", "--plugin-objects=false")
	kubeconfig, err := os.ReadFile(cluster.kubeconfig)
	must(t, err)
	cs := cluster.client(t)
	ctx := context.Background()

	a.run("", "wasmrec new hello --for v1/ConfigMap")
	// $KUBECONFIG names nothing that answers: dev reads the file it is given.
	dev := startDevOn(t, a, "hello", cluster.kubeconfig, "KUBECONFIG="+filepath.Join(a.home, "none"))
	devEventually(t, dev, 90*time.Second, "the plugin annotates default/hello-sample on the running control plane", func() error {
		cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "hello-sample", metav1.GetOptions{})
		if err == nil && cm.Annotations["wasmrec.dev/hello"] != "true" {
			err = fmt.Errorf("its annotations are %v", cm.Annotations)
		}
		return err
	})
	if !strings.Contains(dev.output(), "applied ConfigMap.v1 default/hello-sample from") {
		t.Errorf("dev does not say it applied the sample:\n%s", dev.output())
	}

	// What dev makes on a cluster of one's own and not here: Plugin objects, their ServiceAccounts.
	c, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	must(t, err)
	plugins, err := dynamic.NewForConfigOrDie(c).Resource(pluginGVR).List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(plugins.Items) > 0 {
		t.Errorf("dev --kubeconfig made %d ClusterPlugin objects, want none", len(plugins.Items))
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "wasmrec-plugins", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dev --kubeconfig made the namespace of its plugins' ServiceAccounts (get: %v)", err)
	}

	dev.stop(t)
	out := dev.output()
	if last := lastLine(out); !strings.Contains(last, "msg=stopped") {
		t.Errorf("dev's last line is %q, want the final \"stopped\"", last)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "level=ERROR") {
			t.Errorf("dev --kubeconfig logged an error:\n%s", l)
		}
	}
	// The control plane runs on, with the sample, and its kubeconfig is as it was.
	if _, err := kubernetes.NewForConfigOrDie(c).Discovery().ServerVersion(); err != nil {
		t.Errorf("the control plane after dev --kubeconfig stopped: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "hello-sample", metav1.GetOptions{}); err != nil {
		t.Errorf("the sample dev applied, after it stopped: %v", err)
	}
	if now, err := os.ReadFile(cluster.kubeconfig); err != nil || !bytes.Equal(now, kubeconfig) {
		t.Errorf("the control plane's kubeconfig changed while dev --kubeconfig ran (%v)", err)
	}
	select {
	case err := <-cluster.done:
		t.Fatalf("the control plane's dev exited (%v):\n%s", err, cluster.output())
	default:
	}
	cluster.stop(t)
}

// startDevOn starts `wasmrec dev --kubeconfig KUBECONFIG --plugin .` in dir and waits until it
// runs the plugin.
func startDevOn(t *testing.T, a *author, dir, kubeconfig string, env ...string) *devProcess {
	t.Helper()
	line := "wasmrec dev --kubeconfig " + kubeconfig + " --plugin ."
	d := &devProcess{out: &syncBuffer{}, done: make(chan error, 1), kubeconfig: kubeconfig}
	d.cmd = a.command(dir, line, env...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	must(t, d.cmd.Start())
	a.note("$ %s    (runs until Ctrl-C)\n", line)
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(d.end)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(d.out.String(), "running plugins [") {
		select {
		case err := <-d.done:
			t.Fatalf("dev --kubeconfig exited (%v) before running the plugin:\n%s", err, d.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev --kubeconfig did not run the plugin in 2m:\n%s", d.out.String())
		}
	}
	return d
}

// end stops a dev that a failed test left running: as Ctrl-C does first, so that it stops the
// control plane it started (killed, it would leave etcd, kube-apiserver and
// kube-controller-manager running), and killed only if it is still running a minute later.
func (d *devProcess) end() {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(time.Minute):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}
