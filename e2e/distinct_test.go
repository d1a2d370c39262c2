package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
)

// BenchmarkDistinctPlugins runs ten distinct typed Go plugins busy in one wasmrec host against
// ten native controller-runtime processes doing the same work: each of the ten hashes the
// ConfigMaps of its own namespace of 200 (BenchmarkConfigMapHash's reconcile; the plugins are
// hashtyped-go built ten times with a different variant, so ten modules are compiled and kept,
// as for ten teams' plugins). It reports the host's peak RSS and CPU against the ten processes'
// peak RSS and CPU summed, from start to every ConfigMap hashed, on a warm compilation cache.
func BenchmarkDistinctPlugins(b *testing.B) {
	const plugins, perNamespace = 10, 200
	dir := b.TempDir()
	crhash := filepath.Join(dir, "crhash")
	if out, err := exec.Command("go", "build", "-o", crhash, "./testdata/crhash").CombinedOutput(); err != nil {
		b.Fatalf("building crhash: %v\n%s", err, out)
	}
	modules := make([]string, plugins)
	for i := range plugins {
		modules[i] = filepath.Join(dir, fmt.Sprintf("hashtyped-%d.wasm", i))
		build := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags", fmt.Sprintf("-X main.variant=-%d", i), "-o", modules[i], ".")
		build.Dir = "../host/wasm/testdata/hashtypedgo"
		build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("building variant %d: %v\n%s", i, err, out)
		}
	}
	run := func(name string, start func(nss []string) []*exec.Cmd) (rssMiB, cpu float64) {
		cs := benchClient(b)
		nss := make([]string, plugins)
		wants := make([]map[string]string, plugins)
		for i := range nss {
			nss[i] = namespace(b)
			wants[i] = createHashConfigMaps(b, cs, nss[i], perNamespace)
		}
		cmds := start(nss)
		waitHashed(b, name, nss, wants)
		for _, cmd := range cmds {
			rssMiB += peakResidentMiB(b, cmd.Process.Pid)
			must(b, cmd.Process.Signal(syscall.SIGTERM))
			if err := cmd.Wait(); err != nil {
				b.Fatalf("%s exited with %v:\n%s", name, err, tail(cmd.Stdout.(*lockedBuffer).String(), 30))
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		}
		for _, ns := range nss {
			deleteConfigMaps(b, cs, ns)
		}
		return rssMiB, cpu
	}
	host := func(nss []string) []*exec.Cmd {
		var config strings.Builder
		config.WriteString("plugins:\n")
		for i, ns := range nss {
			fmt.Fprintf(&config, "  - name: team-%02d\n    module: %s\n    namespaces: [%s]\n    maxConcurrentReconciles: 2\n    permissions:\n      - {resources: [configmaps], verbs: [get, list, watch, patch]}\n", i, modules[i], ns)
		}
		d := b.TempDir()
		kubeconfig := filepath.Join(d, "kubeconfig")
		must(b, os.WriteFile(kubeconfig, cp.Kubeconfig, 0o600))
		must(b, os.WriteFile(filepath.Join(d, "host.yaml"), []byte(config.String()), 0o600))
		bin, err := filepath.Abs("../bin/wasmrec")
		must(b, err)
		return []*exec.Cmd{startBenchProcess(b, exec.Command(bin, "run", "--config", filepath.Join(d, "host.yaml"), "--kubeconfig", kubeconfig))}
	}
	native := func(nss []string) []*exec.Cmd {
		var cmds []*exec.Cmd
		for _, ns := range nss {
			cmds = append(cmds, startCRHash(b, crhash, ns))
		}
		return cmds
	}
	run("wasmrec", host) // compiles the ten modules into the cache
	for b.Loop() {
		hostRSS, hostCPU := run("wasmrec", host)
		crRSS, crCPU := run("controller-runtime", native)
		fmt.Fprintf(os.Stderr, "\n%d distinct typed Go plugins, %d ConfigMaps each: one host %.0f MiB peak RSS, %.2f s CPU; %d controller-runtime processes %.0f MiB, %.2f s summed (x: RSS %.2f, CPU %.2f)\n",
			plugins, perNamespace, hostRSS, hostCPU, plugins, crRSS, crCPU, hostRSS/crRSS, hostCPU/crCPU)
		b.ReportMetric(hostRSS, "host-rss-MiB")
		b.ReportMetric(hostCPU, "host-cpu-s")
		b.ReportMetric(crRSS, "cr-rss-MiB")
		b.ReportMetric(crCPU, "cr-cpu-s")
		b.ReportMetric(hostRSS/crRSS, "rss-x")
		b.ReportMetric(hostCPU/crCPU, "cpu-x")
	}
}

// waitHashed waits until every ConfigMap of nss holds its hash.
func waitHashed(b *testing.B, name string, nss []string, wants []map[string]string) {
	b.Helper()
	md := metadata.NewForConfigOrDie(benchConfig()).Resource(corev1.SchemeGroupVersion.WithResource("configmaps"))
	deadline := time.Now().Add(10 * time.Minute)
	for i, ns := range nss {
		for {
			list, err := md.Namespace(ns).List(context.Background(), metav1.ListOptions{})
			must(b, err)
			done := 0
			for _, cm := range list.Items {
				if want, ok := wants[i][cm.Name]; ok && cm.Annotations["bench/hash"] == want {
					done++
				}
			}
			if done == len(wants[i]) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: %d of %d ConfigMaps of %s hashed after 10 minutes", name, done, len(wants[i]), ns)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
