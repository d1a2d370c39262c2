package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/plugin"
)

// registry is a real OCI registry (distribution, Debian's docker-registry) on loopback.
type registry struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

func startRegistry(t *testing.T) *registry {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Fatalf("docker-registry not found: run `make test` (it installs Debian's docker-registry): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.yml")
	must(t, os.WriteFile(conf, fmt.Appendf(nil, "version: 0.1\nlog: {level: error}\nstorage:\n  filesystem: {rootdirectory: %s}\nhttp: {addr: %q}\n", filepath.Join(dir, "data"), addr), 0o600))
	r := &registry{addr: addr, cmd: exec.Command(bin, "serve", conf), done: make(chan struct{})}
	must(t, r.cmd.Start())
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(r.stop)
	eventually(t, 10*time.Second, "the registry listening", func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	return r
}

// createThing creates the Thing ns/name with spec.n, once its CRD is served.
func createThing(t *testing.T, ns, name string, n int64) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "follow.wasmrec.dev/v1", "kind": "Thing",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"n": n}}}
	eventually(t, 30*time.Second, "creating a thing", func() error {
		_, err := dyn(t).Resource(thingGVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		return err
	})
}

func (r *registry) stop() {
	select {
	case <-r.done:
	default:
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// A plugin runs from a registry tag; pushing a new module under the same tag swaps it within
// the poll interval and the cluster converges to the new behaviour; when the registry goes away
// the last good module keeps serving and the failure is reported.
func TestPluginFromRegistry(t *testing.T) {
	reg := startRegistry(t)
	installThings(t)
	ns := namespace(t)
	ctx := context.Background()
	client, err := oci.New(oci.Options{CacheDir: t.TempDir(), Insecure: []string{reg.addr}})
	must(t, err)
	ref := reg.addr + "/plugins/swap:live"
	push := func(name string) {
		t.Helper()
		wasmBytes := module2(t, name)
		if _, err := client.Push(ctx, wasmBytes, []byte(`{}`), ref); err != nil {
			t.Fatal(err)
		}
	}
	// v1 goes in with the CLI, as a user would push it.
	bin, err := filepath.Abs("../bin/wasmrec")
	must(t, err)
	if out, err := exec.Command(bin, "push", wasmFile(t, "testguests", "swap-v1"), ref, "--insecure", reg.addr, "--oci-cache", t.TempDir()).CombinedOutput(); err != nil {
		t.Fatalf("wasmrec push: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "pushed "+ref+": sha256:") {
		t.Fatalf("wasmrec push printed:\n%s", out)
	}
	// inspect reads it by reference, with or without oci:// (as a Plugin's module names it), and
	// its grant names it as host.yaml would.
	for _, arg := range []string{ref, "oci://" + ref} {
		out, err := exec.Command(bin, "inspect", arg, "--insecure", reg.addr, "--oci-cache", t.TempDir()).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "module:       oci://"+ref) {
			t.Fatalf("wasmrec inspect %s: %v\n%s", arg, err, out)
		}
	}
	if out, err := exec.Command(bin, "inspect", "--grant", ref, "--insecure", reg.addr, "--oci-cache", t.TempDir()).CombinedOutput(); err != nil || !strings.Contains(string(out), "module: oci://"+ref) {
		t.Fatalf("wasmrec inspect --grant %s: %v\n%s", ref, err, out)
	}
	// Plain HTTP only when asked: without --insecure the same registry is refused.
	strict, err := oci.New(oci.Options{CacheDir: t.TempDir()})
	must(t, err)
	if _, err := strict.Resolve(ctx, ref, oci.PullOptions{}); err == nil {
		t.Fatal("a plain-HTTP registry was reached without being listed as insecure")
	}

	logs := &logLines{}
	m := metrics.New()
	poll := metav1.Duration{Duration: 250 * time.Millisecond}
	_, plugins := pluginHostFull(t, cfg, logs.logger(), m, client, plugin.Config{Name: "swap", Module: "oci://" + ref, PollInterval: &poll,
		Namespaces: []string{ns}, Permissions: []abi.Permission{grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch")}})
	create := func(name string, n int64) { t.Helper(); createThing(t, ns, name, n) }
	create("x", 1)
	logs.waitFor(t, 30*time.Second, "v1 reconciled x n=1")

	pushed := time.Now()
	push("swap-v2")
	logs.waitFor(t, 30*time.Second, "v2 reconciled x n=1") // every For object is reconciled again after a swap
	t.Logf("v2 pushed under the same tag: first v2 reconcile %s later (poll interval 250ms)", time.Since(pushed).Round(time.Millisecond))
	if got, want := plugins["swap"].Module().Digest(), digestOf(module2(t, "swap-v2")); got != want {
		t.Fatalf("running %s, want v2 %s", got, want)
	}

	reg.stop()
	logs.waitFor(t, 30*time.Second, "polling the module's tag; the current module keeps serving", `"ref"="`+ref+`"`)
	create("y", 2)
	logs.waitFor(t, 30*time.Second, "v2 reconciled y n=2")
	// An unreachable registry refuses nothing: it is not a refused swap.
	if v, _ := value(t, m, "wasmrec_plugin_swaps_total", map[string]string{"plugin": "swap", "outcome": "refused"}); v != 0 {
		t.Errorf("the unreachable registry was counted as %g refused swaps, want none", v)
	}
}
