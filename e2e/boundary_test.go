package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmrec/wasmrec/abi"
	"github.com/wasmrec/wasmrec/host/cache"
	"github.com/wasmrec/wasmrec/host/metrics"
	"github.com/wasmrec/wasmrec/host/oci"
	"github.com/wasmrec/wasmrec/host/plugin"
)

// The grant bounds what a plugin watches: a module that watches Secrets without asking for
// list and watch on them, or asking without being granted them, is refused at load and at
// swap, with the missing rules named, and no Secret informer is ever started for it.
func TestGrantBoundsWatches(t *testing.T) {
	installThings(t)
	ns := namespace(t)
	things := grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch")
	secretKey := cache.Key{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("Secret")}
	noSecretInformer := func(mgrCache *cache.Cache, when string) {
		t.Helper()
		if mgrCache.Active(secretKey) || mgrCache.Active(cache.Key{GroupVersionKind: secretKey.GroupVersionKind, MetadataOnly: true}) {
			t.Fatalf("%s: a Secret informer runs", when)
		}
	}
	for _, c := range []struct {
		module string
		grant  []abi.Permission
		want   []string
	}{
		{"swap-v4", []abi.Permission{things, grant("", []string{"secrets"}, "list", "watch")},
			[]string{"watching v1 Secret needs list core/secrets, watch core/secrets", "manifest does not ask for list core/secrets, watch core/secrets"}},
		{"swap-v5", []abi.Permission{things},
			[]string{"asks for permissions it was not granted: list core/secrets, watch core/secrets"}},
	} {
		t.Run(c.module, func(t *testing.T) {
			// At load.
			path := filepath.Join(t.TempDir(), "swap.wasm")
			writeModule(t, path, module2(t, c.module))
			logs := &logLines{}
			mgr, plugins := pluginHost(t, cfg, logs.logger(), plugin.Config{Name: "v1", Module: wasmFile(t, "testguests", "swap-v1"), Namespaces: []string{ns}, Permissions: c.grant})
			host, err := plugin.NewHost(mgr, sharedEngine(t), nil, logs.logger())
			must(t, err)
			t.Cleanup(host.Close)
			_, err = host.LoadFile(context.Background(), plugin.Config{Name: "bad", Module: path, Namespaces: []string{ns}, Permissions: c.grant})
			if err == nil {
				t.Fatalf("%s loaded", c.module)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the load's refusal does not say %q:\n%v", want, err)
				}
			}
			noSecretInformer(mgr.GetCache(), "after a refused load")

			// At swap, from a module that runs.
			err = plugins["v1"].Swap(context.Background(), module2(t, c.module))
			if err == nil {
				t.Fatalf("the swap to %s was accepted", c.module)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the swap's refusal does not say %q:\n%v", want, err)
				}
			}
			if got, want := plugins["v1"].Module().Digest(), digestOf(module2(t, "swap-v1")); got != want {
				t.Errorf("after the refused swap %s serves, want v1 %s", got, want)
			}
			noSecretInformer(mgr.GetCache(), "after a refused swap")
		})
	}
}

// A module refused for what it is is compiled once, however often its source is looked at: a
// tag polled five times over, and a swap asked for again, compile nothing more.
func TestRefusedModuleIsCompiledOnce(t *testing.T) {
	installThings(t)
	ns := namespace(t)
	reg := startRegistry(t)
	client, err := oci.New(oci.Options{CacheDir: t.TempDir(), Insecure: []string{reg.addr}})
	must(t, err)
	ref := reg.addr + "/plugins/refused:live"
	push := func(name string) {
		t.Helper()
		if _, err := client.Push(context.Background(), module2(t, name), []byte(`{}`), ref); err != nil {
			t.Fatal(err)
		}
	}
	push("swap-v1")
	logs := &logLines{}
	m := metrics.New()
	_, plugins := pluginHostFull(t, cfg, logs.logger(), m, client, plugin.Config{Name: "refused", Module: "oci://" + ref, Namespaces: []string{ns},
		PollInterval: &metav1.Duration{Duration: 250 * time.Millisecond},
		Permissions:  []abi.Permission{grant("follow.wasmrec.dev", []string{"things"}, "get", "list", "watch")}})
	compiles := func() float64 {
		v, _ := value(t, m, "wasmrec_plugin_module_compiles_total", map[string]string{"plugin": "refused"})
		return v
	}
	if n := compiles(); n != 1 {
		t.Fatalf("%g compiles at load, want 1", n)
	}
	push("swap-v5") // asks for Secrets, which the grant lacks
	logs.waitFor(t, 30*time.Second, "module swap refused", "asks for permissions it was not granted")
	time.Sleep(5 * 250 * time.Millisecond) // five poll intervals
	err = plugins["refused"].Swap(context.Background(), module2(t, "swap-v5"))
	var before *plugin.RefusedBeforeError
	if !errors.As(err, &before) {
		t.Errorf("a swap asked for again to the refused module: %v, want a RefusedBeforeError", err)
	}
	if n := compiles(); n != 2 {
		t.Errorf("%g compiles, want 2: the load and the refused module once", n)
	}
	if v, _ := value(t, m, "wasmrec_plugin_swaps_total", map[string]string{"plugin": "refused", "outcome": "refused"}); v != 1 {
		t.Errorf("%g refusals counted, want 1", v)
	}
}

// A guest that looks up 1000 kinds no API server serves, over and over, costs the API server a
// handful of discovery requests, and a neighbour plugin's latency stays within 2x of what it
// was before.
func TestUnknownKindsDoNotHammerDiscovery(t *testing.T) {
	h, addr, loudNS, quietNS := besideANeighbour(t, "lookups")
	before := neighbourLatencies(t, quietNS, "before", 20)
	requestsBefore := scrape(t, addr, "wasmrec_discovery_requests_total")
	began := time.Now()
	misbehaving(t, loudNS, "unknownkinds")
	h.waitOut(t, "looked up 1000 unknown kinds")
	during := neighbourLatencies(t, quietNS, "during", 20)
	elapsed := time.Since(began)
	rounds := strings.Count(h.out.String(), "looked up 1000 unknown kinds")
	requests := scrape(t, addr, "wasmrec_discovery_requests_total") - requestsBefore
	t.Logf("in %s: %d rounds of 1000 lookups of unknown kinds, %.0f discovery requests; neighbour latency median %s before, %s during",
		elapsed.Round(time.Millisecond), rounds, requests, medianDuration(before), medianDuration(during))
	// A plugin gets 5 lookups of kinds the host does not know at once and 1 a second after.
	if limit := 5 + elapsed.Seconds() + 2; requests > limit {
		t.Errorf("%.0f discovery requests in %s, want at most %.0f", requests, elapsed.Round(time.Millisecond), limit)
	}
	if medianDuration(during) > 2*medianDuration(before) {
		t.Errorf("the neighbour's median latency went from %s to %s: more than 2x", medianDuration(before), medianDuration(during))
	}
}
