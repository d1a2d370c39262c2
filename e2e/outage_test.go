package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/wasmrec/wasmrec/host/apiready"
	"github.com/wasmrec/wasmrec/host/controlplane"
)

// apiProxy forwards a local port to the API server, and can cut it: an outage as the host sees
// it, with no harm to the control plane the other tests share.
type apiProxy struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newAPIProxy(t *testing.T, target string) *apiProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &apiProxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *apiProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the port and every connection through it.
func (p *apiProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// restore opens the port again.
func (p *apiProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	must(t, err)
	p.serve(ln)
}

// kubeconfig writes a kubeconfig for the control plane through the proxy.
func (p *apiProxy) kubeconfig(t *testing.T) string {
	t.Helper()
	kc, err := clientcmd.Load(cp.Kubeconfig)
	must(t, err)
	for _, c := range kc.Clusters {
		u, err := url.Parse(c.Server)
		must(t, err)
		u.Host = p.addr
		c.Server = u.String()
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// readyzOf asks h's /readyz (it runs with --health-probe-bind-address and has said where):
// its status code and body.
func readyzOf(t *testing.T, h *hostProcess) func() (int, string) {
	t.Helper()
	h.waitOut(t, `msg="serving health probes"`)
	readyz := probeAddrRE.FindStringSubmatch(h.out.String())[1] + "/readyz"
	return func() (int, string) {
		resp, err := http.Get(readyz)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

var (
	probeAddrRE = regexp.MustCompile(`msg="serving health probes" address=(http://\S+)`)
	gvkRE       = regexp.MustCompile(` gvk="?([^" ]+)`)
)

// The API server goes away for 20 s under a running host: the host says so at once (one line
// per kind, not one per retry), is not ready meanwhile, says when it is back, and reconciles a
// change made after it returned within a few seconds.
func TestAPIServerOutage(t *testing.T) {
	u, err := url.Parse(cfg.Host)
	must(t, err)
	proxy := newAPIProxy(t, u.Host)
	ns := namespace(t)
	h := startHost(t, misbehaveConfig(t, ns, 1), "--kubeconfig", proxy.kubeconfig(t), "--health-probe-bind-address", "127.0.0.1:0")
	h.waitOut(t, `msg="starting workers" plugin=misbehave`)
	h.waitOut(t, `msg="serving health probes"`)
	status := readyzOf(t, h)
	eventually(t, 30*time.Second, "ready", func() error {
		if code, body := status(); code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})
	misbehaving(t, ns, "nap-before")
	h.waitOut(t, "napped nap-before")

	cutAt := time.Now()
	proxy.cut()
	h.waitOut(t, "list/watch failing")
	noticed := time.Since(cutAt)
	eventually(t, 10*time.Second, "not ready during the outage", func() error {
		if code, body := status(); code != http.StatusServiceUnavailable || !strings.Contains(body, "ConfigMap") {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})
	time.Sleep(20*time.Second - time.Since(cutAt))
	// One line per informer (the ConfigMaps, the CRDs, the Plugins, the ClusterPlugins), not one
	// per retry.
	said := map[string]int{}
	for _, line := range strings.Split(h.out.String(), "\n") {
		if m := gvkRE.FindStringSubmatch(line); m != nil && strings.Contains(line, "list/watch failing") {
			said[m[1]]++
		}
	}
	if said["ConfigMap.v1"] != 1 {
		t.Errorf("the failing list/watch of ConfigMaps is said %d times, want once: %v", said["ConfigMap.v1"], said)
	}
	for gvk, n := range said {
		if n > 1 {
			t.Errorf("%d lines say list/watch of %s fails, want one: %v", n, gvk, said)
		}
	}

	proxy.restore(t)
	misbehaving(t, ns, "nap-after")
	restored := time.Now()
	h.waitOut(t, "napped nap-after")
	took := time.Since(restored)
	if took > 5*time.Second {
		t.Errorf("a change made after the API server returned was reconciled %s later, want within 5s", took.Round(time.Millisecond))
	}
	h.waitOut(t, "list/watch works again")
	eventually(t, 10*time.Second, "ready once every informer works again", func() error {
		if code, body := status(); code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})
	t.Logf("outage noticed after %s; a change after it reconciled %s after the API server returned", noticed.Round(time.Millisecond), took.Round(time.Millisecond))
	h.terminate(t)
}

// etcdOf finds the etcd process behind the API server at host ("https://127.0.0.1:PORT"), from
// the processes' command lines: the API server's --etcd-servers names etcd's client URL.
func etcdOf(t *testing.T, host string) *os.Process {
	t.Helper()
	u, err := url.Parse(host)
	must(t, err)
	cmdlines := map[int][]string{}
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	must(t, err)
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		cmdlines[pid] = strings.Split(string(b), "\x00")
	}
	flag := func(args []string, name string) string {
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
			if a == "--"+name && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	var etcdURL string
	for _, args := range cmdlines {
		if len(args) > 0 && filepath.Base(args[0]) == "kube-apiserver" && flag(args, "secure-port") == u.Port() {
			etcdURL = flag(args, "etcd-servers")
		}
	}
	for pid, args := range cmdlines {
		if etcdURL != "" && len(args) > 0 && filepath.Base(args[0]) == "etcd" && strings.Contains(flag(args, "listen-client-urls"), etcdURL) {
			p, err := os.FindProcess(pid)
			must(t, err)
			return p
		}
	}
	t.Fatalf("no etcd process behind the API server at %s (its etcd-servers: %q)", host, etcdURL)
	return nil
}

// The API server's etcd stops answering (frozen, as a hung or partitioned etcd) under a running
// host: the API server still serves its watch cache, so the informers see nothing, but the host
// asks the API server's own /readyz, says the outage once, naming the failing checks, is not
// ready meanwhile, and says when it is over. A control plane of its own: the others' stays up.
func TestEtcdOutage(t *testing.T) {
	t.Parallel() // see e2e/doc.go: what may run beside others
	own, err := controlplane.Start(controlplane.Options{})
	must(t, err)
	t.Cleanup(func() { _ = own.Stop() })
	etcd := etcdOf(t, own.Config.Host)
	t.Cleanup(func() { _ = etcd.Signal(syscall.SIGCONT) })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, os.WriteFile(kubeconfig, own.Kubeconfig, 0o600))
	h := startHost(t, "plugins: []\n", "--kubeconfig", kubeconfig, "--health-probe-bind-address", "127.0.0.1:0")
	h.waitOut(t, `msg="serving health probes"`)
	status := readyzOf(t, h)
	eventually(t, 30*time.Second, "ready", func() error {
		if code, body := status(); code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})

	frozen := time.Now()
	must(t, etcd.Signal(syscall.SIGSTOP))
	h.waitOut(t, `msg="the API server is not ready: its own checks fail`)
	noticed := time.Since(frozen)
	// Quoted when several checks fail ("etcd,etcd-readiness"), bare when one does.
	if out := h.out.String(); !strings.Contains(out, `failing="etcd`) && !strings.Contains(out, `failing=etcd`) {
		t.Errorf("the outage's line does not name etcd:\n%s", tail(h.out.String(), 5))
	}
	eventually(t, 10*time.Second, "not ready during the outage", func() error {
		if code, body := status(); code != http.StatusServiceUnavailable || !strings.Contains(body, "the API server is not ready") {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})
	time.Sleep(3 * apiready.Interval) // more checks: still one line
	if n := strings.Count(h.out.String(), "the API server is not ready: its own checks fail"); n != 1 {
		t.Errorf("the outage is said %d times, want once:\n%s", n, tail(h.out.String(), 10))
	}

	must(t, etcd.Signal(syscall.SIGCONT))
	thawed := time.Now()
	h.waitOut(t, `msg="the API server is ready again"`)
	back := time.Since(thawed)
	eventually(t, 10*time.Second, "ready once etcd is back", func() error {
		if code, body := status(); code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", code, body)
		}
		return nil
	})
	t.Logf("an etcd outage said %s after it began, its end %s after", noticed.Round(time.Millisecond), back.Round(time.Millisecond))
	h.terminate(t)
}
