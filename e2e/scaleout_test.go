package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/wasmrec/wasmrec/host/controlplane"
	"github.com/wasmrec/wasmrec/host/ownership"
	"github.com/wasmrec/wasmrec/host/shard"
)

// The scale-out tests run several `wasmrec run --share-plugins` processes on the test API
// server with the settings a user gets (Leases of 15 s, renewed every 2 s), and the overlap
// guest, which logs "overlap begin" and "overlap end" around each reconcile and copies data.gen
// into the annotation overlap/seen. Every process's log is kept, killed ones too, so a checker
// can look for one key reconciled by two replicas at once.

// overlapPlugin is a host config entry running the overlap guest as name, split into shards
// (0: not split), limited to namespaces (none: every namespace).
func overlapPlugin(t testing.TB, name string, shards int, namespaces ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: %s\n    module: %s\n", name, wasmFile(t, "testguests", "overlap"))
	if shards > 0 {
		fmt.Fprintf(&b, "    shards: %d\n", shards)
	}
	if len(namespaces) > 0 {
		fmt.Fprintf(&b, "    namespaces: [%s]\n", strings.Join(namespaces, ", "))
	}
	b.WriteString("    permissions:\n      - {group: \"\", resources: [configmaps], verbs: [get, list, watch, patch]}\n")
	return b.String()
}

// pluginsEach is a host config of n overlap plugins named by format, each over a namespace of
// its own holding perPlugin ConfigMaps.
func pluginsEach(t *testing.T, format string, n, perPlugin int) (config string, units, namespaces []string, cms []types.NamespacedName) {
	t.Helper()
	var b strings.Builder
	b.WriteString("plugins:\n")
	for i := range n {
		ns := namespace(t)
		namespaces = append(namespaces, ns)
		name := fmt.Sprintf(format, i)
		units = append(units, name)
		b.WriteString(overlapPlugin(t, name, 0, ns))
	}
	return b.String(), units, namespaces, makeConfigMaps(t, namespaces, perPlugin)
}

// replicaSet is the host processes of one test, past and present.
type replicaSet struct {
	t         *testing.T
	config    string
	args      []string
	mu        sync.Mutex
	all       []*hostReplica // every process started, in order
	checkLogs bool
}

// hostReplica is one host process of a replicaSet.
type hostReplica struct {
	h       *hostProcess
	name    string
	metrics string    // the metrics URL
	killed  time.Time // when it was killed (SIGKILL), zero if it was not
}

func newReplicaSet(t *testing.T, config, leaseNS string) *replicaSet {
	return &replicaSet{t: t, config: config, args: []string{"--share-plugins", "--leader-election-namespace", leaseNS,
		"--log-format", "json", "--metrics-bind-address", "127.0.0.1:0", "--plugin-objects=false"}}
}

var metricsJSONPrefix = `"msg":"serving metrics","address":"`

func (s *replicaSet) start(name string) *hostReplica {
	s.t.Helper()
	h := startHost(s.t, s.config, s.args...)
	h.waitOut(s.t, metricsJSONPrefix)
	_, rest, _ := strings.Cut(h.out.String(), metricsJSONPrefix)
	addr, _, _ := strings.Cut(rest, `"`)
	r := &hostReplica{h: h, name: name, metrics: addr + "/metrics"}
	s.mu.Lock()
	s.all = append(s.all, r)
	s.mu.Unlock()
	return r
}

// kill stops r with SIGKILL, as a crash; stop with SIGTERM, as a rollout.
func (r *hostReplica) kill(t *testing.T) {
	r.killed = time.Now()
	must(t, r.h.cmd.Process.Signal(syscall.SIGKILL))
	<-r.h.exited
}

func (r *hostReplica) stop(t *testing.T) { r.h.terminate(t) }

func (r *hostReplica) alive() bool { return r.h.cmd.ProcessState == nil }

// owned reads wasmrec_plugin_shard_owned: the units r holds ("plugin" or "plugin/shard").
func (r *hostReplica) owned(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range samples(t, r.metrics, "wasmrec_plugin_shard_owned") {
		if m.value == 1 {
			u := m.labels["plugin"]
			if s := m.labels["shard"]; s != "" { // "1/3": the unit is plugin/1
				i, _, _ := strings.Cut(s, "/")
				u += "/" + i
			}
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

type sample struct {
	labels map[string]string
	value  float64
}

// samples reads the samples of one metric from a host's /metrics.
func samples(t testing.TB, url, name string) []sample {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		s := sample{labels: map[string]string{}}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			for _, kv := range strings.Split(line[i+1:j], ",") {
				k, v, _ := strings.Cut(kv, "=")
				s.labels[k] = strings.Trim(v, `"`)
			}
		}
		s.value, err = strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		must(t, err)
		out = append(out, s)
	}
	return out
}

// live are the replicas running now.
func (s *replicaSet) live() []*hostReplica {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*hostReplica
	for _, r := range s.all {
		if r.alive() {
			out = append(out, r)
		}
	}
	return out
}

// waitSpread waits until the live replicas hold every one of units, each once, each replica
// between lo and hi of them and none more than its share of a plugin's shards (2 of 3 shards on
// 2 replicas, 1 on 3); it returns how long that took.
func (s *replicaSet) waitSpread(units []string, lo, hi int, timeout time.Duration) time.Duration {
	s.t.Helper()
	shards := map[string]int{} // by plugin
	for _, u := range units {
		if p, _, isShard := shard.SplitUnit(u); isShard {
			shards[p]++
		}
	}
	began := time.Now()
	var last string
	for time.Since(began) < timeout {
		held := map[string]int{}
		ok := true
		var b strings.Builder
		live := s.live()
		for _, r := range live {
			own := r.owned(s.t)
			fmt.Fprintf(&b, "%s holds %d %v; ", r.name, len(own), own)
			if len(own) < lo || len(own) > hi {
				ok = false
			}
			perPlugin := map[string]int{}
			for _, u := range own {
				held[u]++
				if p, _, isShard := shard.SplitUnit(u); isShard {
					if perPlugin[p]++; perPlugin[p] > (shards[p]+len(live)-1)/len(live) {
						ok = false
					}
				}
			}
		}
		for _, u := range units {
			ok = ok && held[u] == 1
		}
		if ok {
			return time.Since(began)
		}
		last = b.String()
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("after %s the replicas do not hold the %d units %d to %d each: %s", timeout, len(units), lo, hi, last)
	return 0
}

// overlaps reads every process's log and returns the reconciles of one key that ran at once,
// on two replicas or on one. A killed process's reconcile that had begun ends when it was
// killed.
func (s *replicaSet) overlaps() (reconciles int, found []string) {
	type span struct {
		from, to time.Time
		replica  string
	}
	spans := map[string][]span{}
	s.mu.Lock()
	all := slices.Clone(s.all)
	s.mu.Unlock()
	for _, r := range all {
		open := map[string]time.Time{}
		for _, line := range strings.Split(r.h.out.String(), "\n") {
			if !strings.Contains(line, `"msg":"overlap `) {
				continue
			}
			var l struct {
				Time            time.Time
				Msg             string
				Plugin, Request string
				Shadow          bool // a new version's shadow run: it writes nothing
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Shadow {
				continue
			}
			key := l.Plugin + " " + l.Request
			switch l.Msg {
			case "overlap begin":
				open[key] = l.Time
			case "overlap end":
				spans[key] = append(spans[key], span{open[key], l.Time, r.name})
				delete(open, key)
				reconciles++
			}
		}
		for key, from := range open {
			to := r.killed
			if to.IsZero() {
				to = time.Now() // still running
			}
			spans[key] = append(spans[key], span{from, to, r.name})
		}
	}
	for key, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i].from.Before(ss[j].from) })
		for i := 1; i < len(ss); i++ {
			if ss[i].from.Before(ss[i-1].to) {
				found = append(found, fmt.Sprintf("%s: %s reconciled it from %s to %s, %s from %s", key,
					ss[i-1].replica, ss[i-1].from.Format("15:04:05.000000"), ss[i-1].to.Format("15:04:05.000000"),
					ss[i].replica, ss[i].from.Format("15:04:05.000000")))
			}
		}
	}
	return reconciles, found
}

// writer bumps data.gen of random ConfigMaps until stopped and remembers the last gen written
// to each.
type writer struct {
	cs    kubernetes.Interface
	cms   []types.NamespacedName
	mu    sync.Mutex
	last  map[types.NamespacedName]int
	stop  chan struct{}
	done  chan struct{}
	count int
}

func startWriter(t *testing.T, cms []types.NamespacedName, every time.Duration) *writer {
	w := &writer{cs: kubernetes.NewForConfigOrDie(cfg), cms: cms, last: map[types.NamespacedName]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for gen := 2; ; gen++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			nn := cms[rand.IntN(len(cms))]
			patch := fmt.Sprintf(`{"data":{"gen":"%d"}}`, gen)
			if _, err := w.cs.CoreV1().ConfigMaps(nn.Namespace).Patch(context.Background(), nn.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			w.mu.Lock()
			w.last[nn] = gen
			w.count++
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *writer) halt() {
	close(w.stop)
	<-w.done
}

// makeConfigMaps creates n ConfigMaps with data.gen 1 in each namespace.
func makeConfigMaps(t testing.TB, namespaces []string, n int) []types.NamespacedName {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	var out []types.NamespacedName
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(namespaces))
	for _, ns := range namespaces {
		wg.Go(func() {
			for i := range n {
				name := fmt.Sprintf("cm-%04d", i)
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"gen": "1"}}, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				out = append(out, types.NamespacedName{Namespace: ns, Name: name})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// waitSeen waits until every ConfigMap's overlap/seen annotation is its data.gen: every change
// reconciled. It returns how many it checked.
func waitSeen(t testing.TB, namespaces []string, timeout time.Duration) int {
	t.Helper()
	return waitSeenOn(t, kubernetes.NewForConfigOrDie(cfg), namespaces, timeout)
}

// waitSeenOn is waitSeen on the cluster cs reaches.
func waitSeenOn(t testing.TB, cs kubernetes.Interface, namespaces []string, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var behind []string
		total := 0
		for _, ns := range namespaces {
			list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
			must(t, err)
			for _, cm := range list.Items {
				if cm.Data["gen"] == "" {
					continue // kube-root-ca.crt
				}
				total++
				if cm.Annotations["overlap/seen"] != cm.Data["gen"] {
					behind = append(behind, fmt.Sprintf("%s/%s gen %s seen %q", ns, cm.Name, cm.Data["gen"], cm.Annotations["overlap/seen"]))
				}
			}
		}
		if len(behind) == 0 {
			return total
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d changes are not reconciled, e.g. %s", timeout, len(behind), total, behind[0])
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// randomNamespaces creates n namespaces named prefix and a random suffix, as generateName
// makes them: the API server's shard hash (FNV-1a) spreads such names, not sequential ones.
func randomNamespaces(t *testing.T, prefix string, n int) []string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	var out []string
	for range n {
		ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
		must(t, err)
		out = append(out, ns.Name)
	}
	return out
}

// report appends lines to bin/scaleout.txt, which make test prints.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	f, err := os.OpenFile("../bin/scaleout.txt", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	must(t, err)
	defer f.Close()
	fmt.Fprintln(f, line)
}

// 3 replicas share 12 units, 4 each (give or take one): 6 plugins, and 2 plugins of 3 shards
// each; replicas are killed (SIGKILL) and stopped (SIGTERM) and started again 5 times while a
// writer keeps changing the plugins' objects: each time the units run elsewhere within about
// the lease duration and spread again, no replica holding two shards of one plugin once the
// replica is back, no change is lost, and no key is ever reconciled by two replicas at once.
func TestSharedPluginsFailOverAndRebalance(t *testing.T) {
	t.Parallel() // see e2e/doc.go: what may run beside others
	const plugins, perPlugin = 6, 20
	leaseNS := namespace(t)
	config, units, namespaces, cms := pluginsEach(t, "share-%02d", plugins, perPlugin)
	for _, name := range []string{"sharded-a", "sharded-b"} {
		nss := randomNamespaces(t, name+"-", 6)
		config += overlapPlugin(t, name, 3, nss...)
		namespaces = append(namespaces, nss...)
		cms = append(cms, makeConfigMaps(t, nss, perPlugin)...)
		for i := range 3 {
			units = append(units, shard.Unit(name, i))
		}
	}
	set := newReplicaSet(t, config, leaseNS)
	reps := []*hostReplica{set.start("a"), set.start("b"), set.start("c")}
	took := set.waitSpread(units, 3, 5, time.Minute)
	report(t, "shared plugins: 3 replicas started: %d units spread 4 +/- 1 each, a plugin's shards on different replicas, in %s", len(units), took.Round(time.Millisecond))
	waitSeen(t, namespaces, time.Minute)

	w := startWriter(t, cms, 20*time.Millisecond)
	// Five cycles, crashes and rollouts, on each replica in turn.
	for i, how := range []string{"SIGKILL", "SIGTERM", "SIGKILL", "SIGTERM", "SIGKILL"} {
		victim := reps[i%3]
		held := victim.owned(t)
		if how == "SIGKILL" {
			victim.kill(t)
		} else {
			victim.stop(t)
		}
		failover := set.waitSpread(units, 5, 7, 45*time.Second)
		limit := ownership.DefaultLeaseDuration + 2*ownership.DefaultRetryPeriod
		report(t, "shared plugins: %s of %s (holding %v): its plugins ran elsewhere after %s", how, victim.name, held, failover.Round(time.Millisecond))
		if how == "SIGKILL" && failover > limit {
			t.Errorf("after a SIGKILL the plugins ran elsewhere after %s: want within the lease duration (%s, with %s to see it)", failover, ownership.DefaultLeaseDuration, 2*ownership.DefaultRetryPeriod)
		}
		reps[i%3] = set.start(fmt.Sprintf("%c%d", victim.name[0], i+1))
		rebalance := set.waitSpread(units, 3, 5, time.Minute)
		report(t, "shared plugins: %s started again: 4 +/- 1 each, no replica with two shards of a plugin, after %s (rejoin %d of 5)", reps[i%3].name, rebalance.Round(time.Millisecond), i+1)
	}
	w.halt()
	checked := waitSeen(t, namespaces, time.Minute)
	reconciles, overlaps := set.overlaps()
	report(t, "shared plugins: 5 kill/stop and restart cycles under a writer: %d changes written, %d ConfigMaps reconciled to their last change (0 lost), %d reconciles in %d process logs, %d overlaps",
		w.count, checked, reconciles, len(set.all), len(overlaps))
	for _, o := range overlaps {
		t.Error("overlap: " + o)
	}
}

// A plugin with shards: 3 over 3 replicas, on 3000 ConfigMaps in 30 namespaces: every object
// is reconciled by the replica that holds its namespace's shard, and each replica's cache holds
// its shard only (the API server filters with the ShardedListAndWatch gate on). A single host
// that does not share plugins caches every ConfigMap: its resident memory is the one to beat.
func TestShardedPluginSplitsTheCache(t *testing.T) {
	const nss, perNS, shards = 30, 100, 3
	leaseNS := namespace(t)
	namespaces := randomNamespaces(t, "shard-", nss)
	cms := makeConfigMaps(t, namespaces, perNS)
	config := "plugins:\n" + overlapPlugin(t, "sharded", shards)

	// One host, not sharing: the whole cache.
	single := startHost(t, config, "--metrics-bind-address", "127.0.0.1:0", "--plugin-objects=false")
	waitSeen(t, namespaces, 2*time.Minute)
	single.waitOut(t, `msg="serving metrics"`)
	singleObjs := cachedConfigMaps(t, metricsAddrRE.FindStringSubmatch(single.out.String())[1]+"/metrics")
	singleRSS := residentMiB(t, single.cmd.Process.Pid)
	single.terminate(t)
	// The single host reconciled them all: make every object change, for the replicas to see,
	// 16 patches at a time, past the tests' client's 200 qps.
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 2000, 2000
	cs := kubernetes.NewForConfigOrDie(fast)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < len(cms); i += 16 {
				if _, err := cs.CoreV1().ConfigMaps(cms[i].Namespace).Patch(context.Background(), cms[i].Name, types.MergePatchType, []byte(`{"data":{"gen":"2"}}`), metav1.PatchOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	set := newReplicaSet(t, config, leaseNS)
	reps := []*hostReplica{set.start("a"), set.start("b"), set.start("c")}
	set.waitSpread([]string{"sharded/0", "sharded/1", "sharded/2"}, 1, 1, time.Minute)
	checked := waitSeen(t, namespaces, 2*time.Minute)

	// Each reconcile ran on the replica holding its namespace's shard.
	shardOf := map[string]int{}
	for _, r := range reps {
		own := r.owned(t)
		i, _ := strconv.Atoi(strings.TrimPrefix(own[0], "sharded/"))
		shardOf[r.name] = i
	}
	wrong := 0
	for _, r := range reps {
		for _, line := range strings.Split(r.h.out.String(), "\n") {
			if !strings.Contains(line, `"msg":"overlap end"`) {
				continue
			}
			var l struct{ Request string }
			must(t, json.Unmarshal([]byte(line), &l))
			ns, _, _ := strings.Cut(l.Request, "/")
			if shard.IndexOf(ns, shards) != shardOf[r.name] {
				wrong++
				if wrong < 5 {
					t.Errorf("%s (shard %d) reconciled %s, of shard %d", r.name, shardOf[r.name], l.Request, shard.IndexOf(ns, shards))
				}
			}
		}
	}
	reconciles, overlaps := set.overlaps()
	for _, o := range overlaps {
		t.Error("overlap: " + o)
	}
	report(t, "sharded plugin: %d ConfigMaps in %d namespaces, shards: 3 over 3 replicas: all reconciled (%d reconciles, %d by a replica not holding the shard, %d overlaps)",
		checked, nss, reconciles, wrong, len(overlaps))
	report(t, "sharded plugin: a single host not sharing caches %d ConfigMaps, RSS %.0f MiB", singleObjs, singleRSS)
	// What each shard holds of the cluster's ConfigMaps, the test's and those other tests left
	// behind (their namespaces are never finalized here: no namespace controller runs).
	all, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{})
	must(t, err)
	inShard := make([]int, shards)
	for _, cm := range all.Items {
		inShard[shard.IndexOf(cm.Namespace, shards)]++
	}
	total := 0
	for _, r := range reps {
		n := cachedConfigMaps(t, r.metrics)
		total += n
		report(t, "sharded plugin: replica %s (shard %d) caches %d ConfigMaps (%.0f%% of the single host's), RSS %.0f MiB", r.name, shardOf[r.name], n, 100*float64(n)/float64(singleObjs), residentMiB(t, r.h.cmd.Process.Pid))
		if want := inShard[shardOf[r.name]]; n > want+want/20+10 {
			t.Errorf("replica %s caches %d of %d ConfigMaps, its shard's are %d: it caches more than its shard", r.name, n, singleObjs, want)
		}
	}
	if total != singleObjs {
		t.Errorf("the replicas' caches hold %d ConfigMaps together, the single host's %d: the shards must split them exactly", total, singleObjs)
	}
	if strings.Contains(reps[0].h.out.String(), "does not filter by shard") {
		t.Error("the API server did not filter by shard: is ShardedListAndWatch on?")
	}
}

// cachedConfigMaps reads wasmrec_informer_objects for ConfigMaps from a host's metrics.
func cachedConfigMaps(t *testing.T, url string) int {
	t.Helper()
	n := 0
	for _, s := range samples(t, url, "wasmrec_informer_objects") {
		if s.labels["kind"] == "ConfigMap.v1" {
			n += int(s.value)
		}
	}
	return n
}

// BenchmarkShardedConvergence measures what sharding is for: 10000 ConfigMaps in 30 namespaces,
// ten in each shard (the names are drawn until they are: 30 random names fall 14/9/7 as often as
// not, and the biggest shard then sets the pace), hashed by the hashc plugin with shards: 3 (as BenchmarkConfigMapHash does, 2 workers a
// replica), run by 1, 2 and 3 replicas sharing plugins; and by one controller-runtime process
// (crhash, every namespace) for scale. Each run starts on fresh ConfigMaps and measures, from
// the first process's start, the time until every ConfigMap holds its hash; then each process's
// peak RSS (VmHWM, read before it is stopped) and peak private memory (samplePrivate) and, once
// it has exited on SIGTERM, its CPU time. A replica's fixed cost is measured first: an idle
// replica sharing no plugin; the memory ratios are also given less it, as what sharding divides.
// The API server, etcd and
// every replica share this machine's cores: more replicas add no cores here, so the figures to
// read are each replica's CPU and memory.
func BenchmarkShardedConvergence(b *testing.B) {
	const n, nss, shards = 10000, 30, 3
	crhash := filepath.Join(b.TempDir(), "crhash")
	if out, err := exec.Command("go", "build", "-o", crhash, "./testdata/crhash").CombinedOutput(); err != nil {
		b.Fatalf("building crhash: %v\n%s", err, out)
	}
	config := fmt.Sprintf("plugins:\n  - name: hashc\n    module: %s\n    shards: %d\n    maxConcurrentReconciles: 2\n    permissions:\n      - {resources: [configmaps], verbs: [get, list, watch, patch]}\n",
		wasmFile(b, "testguests", "hashc"), shards)
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(b, os.WriteFile(kubeconfig, cp.Kubeconfig, 0o600))
	must(b, os.WriteFile(filepath.Join(dir, "host.yaml"), []byte(config), 0o600))
	bin, err := filepath.Abs("../bin/wasmrec")
	must(b, err)
	leaseNS := namespace(b)
	replica := func() *exec.Cmd {
		return startBenchProcess(b, exec.Command(bin, "run", "--config", filepath.Join(dir, "host.yaml"), "--kubeconfig", kubeconfig,
			"--share-plugins", "--leader-election-namespace", leaseNS, "--plugin-objects=false"))
	}
	cr := func() *exec.Cmd {
		cmd := exec.Command(crhash)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		return startBenchProcess(b, cmd)
	}
	// A replica's fixed cost: a host sharing no plugin, synced and renewing its Lease. Most of
	// its RSS is the binary's pages, which replicas on one node share.
	must(b, os.WriteFile(filepath.Join(dir, "idle.yaml"), []byte("plugins: []\n"), 0o600))
	idle := startBenchProcess(b, exec.Command(bin, "run", "--config", filepath.Join(dir, "idle.yaml"), "--kubeconfig", kubeconfig,
		"--share-plugins", "--leader-election-namespace", namespace(b), "--plugin-objects=false"))
	idlePrivate := samplePrivate(idle.Process.Pid)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(idle.Stdout.(*lockedBuffer).String(), "sharing plugins with the other replicas"); {
		if time.Now().After(deadline) {
			b.Fatalf("an idle replica did not start sharing within a minute:\n%s", tail(idle.Stdout.(*lockedBuffer).String(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * ownership.DefaultRetryPeriod) // a renewal or two
	idleRSS, idlePriv := peakResidentMiB(b, idle.Process.Pid), idlePrivate()
	must(b, idle.Process.Signal(syscall.SIGTERM))
	must(b, idle.Wait())
	fmt.Fprintf(os.Stderr, "\nan idle replica (no plugin): peak RSS %.0f MiB, peak private %.0f MiB", idleRSS, idlePriv)
	fmt.Fprintf(os.Stderr, "\n%d ConfigMaps in %d namespaces  converge  per process: CPU, peak RSS, peak private\n", n, nss)
	var crConverge time.Duration
	var one shardedFigures // the 1 replica run's
	for _, run := range []struct {
		name  string
		procs int
		start func() *exec.Cmd
	}{{"cr", 1, cr}, {"1 replica", 1, replica}, {"2 replicas", 2, replica}, {"3 replicas", 3, replica}} {
		b.Run(strings.ReplaceAll(run.name, " ", "-"), func(b *testing.B) {
			var f shardedFigures
			for b.Loop() {
				f = shardedRun(b, n, nss, shards, run.procs, run.start)
			}
			if run.name == "cr" {
				crConverge = f.converge
			}
			fmt.Fprintf(os.Stderr, "  %-12s %-9s", run.name, f.converge.Round(time.Millisecond))
			for i := range f.cpu {
				fmt.Fprintf(os.Stderr, " [%s, %.0f MiB, %.0f MiB]", f.cpu[i].Round(time.Millisecond), f.rssMiB[i], f.privateMiB[i])
			}
			if run.name != "cr" && crConverge > 0 {
				x := f.converge.Seconds() / crConverge.Seconds()
				fmt.Fprintf(os.Stderr, "  (converge x cr %.2f)", x)
				b.ReportMetric(x, "converge-x-cr")
			}
			if run.procs > 1 && one.cpu != nil {
				// The most any replica takes, against the one replica that ran every shard.
				cpu := slices.Max(f.cpu).Seconds() / one.cpu[0].Seconds()
				rss := slices.Max(f.rssMiB) / one.rssMiB[0]
				private := slices.Max(f.privateMiB) / one.privateMiB[0]
				// Less what an idle replica holds: what sharding divides.
				rssNet := (slices.Max(f.rssMiB) - idleRSS) / (one.rssMiB[0] - idleRSS)
				privateNet := (slices.Max(f.privateMiB) - idlePriv) / (one.privateMiB[0] - idlePriv)
				fmt.Fprintf(os.Stderr, "  (the largest replica x 1 replica: CPU %.2f, RSS %.2f, private %.2f; less an idle replica's memory: RSS %.2f, private %.2f)", cpu, rss, private, rssNet, privateNet)
				b.ReportMetric(rssNet, "max-rss-net-x-1")
				b.ReportMetric(privateNet, "max-private-net-x-1")
				b.ReportMetric(cpu, "max-cpu-x-1")
				b.ReportMetric(rss, "max-rss-x-1")
				b.ReportMetric(private, "max-private-x-1")
			}
			if run.name == "1 replica" {
				one = f
			}
			fmt.Fprintln(os.Stderr)
			b.ReportMetric(f.converge.Seconds(), "converge-s")
			b.ReportMetric(slices.Max(f.rssMiB), "max-rss-MiB")
			b.ReportMetric(slices.Max(f.privateMiB), "max-private-MiB")
		})
	}
}

type shardedFigures struct {
	converge           time.Duration
	cpu                []time.Duration
	rssMiB, privateMiB []float64
}

// shardedRun creates n ConfigMaps spread over nss new namespaces, as many in each of shards
// shards, starts procs processes and waits until every ConfigMap holds its hash; then it stops
// them and deletes the namespaces.
func shardedRun(b *testing.B, n, nss, shards, procs int, start func() *exec.Cmd) shardedFigures {
	b.Helper()
	cs := benchClient(b)
	var namespaces []string
	perShard := make([]int, shards)
	for len(namespaces) < nss {
		name := fmt.Sprintf("bench-shard-%08x", rand.Uint32())
		if i := shard.IndexOf(name, shards); perShard[i] < nss/shards || len(namespaces) >= nss/shards*shards {
			_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			must(b, err)
			perShard[i]++
			namespaces = append(namespaces, name)
		}
	}
	want := make(map[string]string, n)
	var mu sync.Mutex
	createConfigMaps(b, cs, n, metav1.CreateOptions{}, func(i int) *corev1.ConfigMap {
		cm := benchConfigMap(namespaces[i%nss], i)
		mu.Lock()
		want[cm.Namespace+"/"+cm.Name] = hashData(cm.Data)
		mu.Unlock()
		return cm
	})
	md := metadata.NewForConfigOrDie(benchConfig()).Resource(corev1.SchemeGroupVersion.WithResource("configmaps"))
	list, err := md.List(context.Background(), metav1.ListOptions{Limit: 1})
	must(b, err)
	w, err := md.Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	must(b, err)
	defer w.Stop()

	began := time.Now()
	var cmds []*exec.Cmd
	var privates []func() float64
	for range procs {
		cmd := start()
		cmds = append(cmds, cmd)
		privates = append(privates, samplePrivate(cmd.Process.Pid))
	}
	done := map[string]bool{}
	timeout := time.After(10 * time.Minute)
	for len(done) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the watch ended")
			}
			cm, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			key := cm.Namespace + "/" + cm.Name
			if h, ok := want[key]; ok && cm.Annotations["bench/hash"] == h {
				done[key] = true
			}
		case <-timeout:
			b.Fatalf("%d of %d converged after 10 minutes", len(done), n)
		}
	}
	f := shardedFigures{converge: time.Since(began)}
	for i, cmd := range cmds {
		f.rssMiB = append(f.rssMiB, peakResidentMiB(b, cmd.Process.Pid))
		f.privateMiB = append(f.privateMiB, privates[i]())
	}
	for _, cmd := range cmds {
		must(b, cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			b.Fatalf("exited with %v:\n%s", err, tail(cmd.Stdout.(*lockedBuffer).String(), 30))
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		f.cpu = append(f.cpu, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
	}
	for _, ns := range namespaces {
		deleteConfigMaps(b, cs, ns)
		must(b, cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}))
	}
	return f
}

// The overlap checker sees overlaps where there are some: two hosts that do not share plugins
// both reconcile every change, at once.
func TestOverlapCheckerSeesHostsThatDoNotShare(t *testing.T) {
	ns := namespace(t)
	cms := makeConfigMaps(t, []string{ns}, 20)
	config := "plugins:\n" + overlapPlugin(t, "both", 0, ns)
	set := newReplicaSet(t, config, ns)
	set.args = slices.DeleteFunc(slices.Clone(set.args), func(a string) bool { return a == "--share-plugins" })
	set.start("x")
	set.start("y")
	waitSeen(t, []string{ns}, time.Minute)
	w := startWriter(t, cms, 20*time.Millisecond)
	time.Sleep(3 * time.Second)
	w.halt()
	waitSeen(t, []string{ns}, time.Minute)
	if reconciles, overlaps := set.overlaps(); len(overlaps) == 0 {
		t.Errorf("two hosts not sharing made %d reconciles and the checker found no overlap", reconciles)
	}
}

// With --warm-standby each replica also keeps synced the shard it would take over first: every
// shard is cached twice across 3 replicas, once where it runs and once where it waits, and a
// replica that takes a shard over starts on that warm cache.
func TestWarmStandbyCachesTheNextShard(t *testing.T) {
	const nss, perNS, shards = 12, 25, 3
	leaseNS := namespace(t)
	namespaces := randomNamespaces(t, "standby-", nss)
	makeConfigMaps(t, namespaces, perNS)
	config := "plugins:\n" + overlapPlugin(t, "standby", shards)
	set := newReplicaSet(t, config, leaseNS)
	set.args = append(set.args, "--warm-standby")
	reps := []*hostReplica{set.start("a"), set.start("b"), set.start("c")}
	units := []string{"standby/0", "standby/1", "standby/2"}
	set.waitSpread(units, 1, 1, time.Minute)
	waitSeen(t, namespaces, time.Minute)

	// Each shard is cached by its holder and by one replica standing by.
	deadline := time.Now().Add(30 * time.Second)
	for {
		perShard := map[string]int{}
		var b strings.Builder
		for _, r := range reps {
			var cached []string
			for _, s := range samples(t, r.metrics, "wasmrec_informer_objects") {
				if s.labels["kind"] == "ConfigMap.v1" && s.labels["shard"] != "" {
					perShard[s.labels["shard"]]++
					cached = append(cached, s.labels["shard"])
				}
			}
			fmt.Fprintf(&b, "%s holds %v and caches %v; ", r.name, r.owned(t), cached)
		}
		if len(perShard) == shards && perShard["0/3"] == 2 && perShard["1/3"] == 2 && perShard["2/3"] == 2 {
			report(t, "warm standby: %s", b.String())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want every shard cached by two replicas: %s", b.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	reps[0].stop(t)
	took := set.waitSpread(units, 1, 2, 30*time.Second)
	report(t, "warm standby: a stopped: its shard ran elsewhere after %s", took.Round(time.Millisecond))
	if _, overlaps := set.overlaps(); len(overlaps) > 0 {
		t.Errorf("overlaps: %v", overlaps)
	}
}

// Plugin objects on replicas sharing plugins: each replica writes what it holds of the plugin in
// status.replicas, one writes the conditions, and a replica that stops is removed from it.
func TestPluginObjectStatusPerReplica(t *testing.T) {
	installPluginCRD(t)
	ns := namespace(t)
	makeConfigMaps(t, []string{ns}, 10)
	set := newReplicaSet(t, "plugins: []\npluginObjects: {sources: [/]}\n", namespace(t))
	set.args = slices.DeleteFunc(slices.Clone(set.args), func(a string) bool { return a == "--plugin-objects=false" })
	a, _ := set.start("a"), set.start("b")
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "wasmrec.dev/v1alpha1", "kind": "Plugin",
		"metadata": map[string]any{"name": "shared-status"},
		"spec": map[string]any{"module": wasmFile(t, "testguests", "overlap"), "shards": int64(2), "namespaces": []any{ns},
			"permissions": []any{map[string]any{"group": "", "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch", "patch"}}}}}}
	ctx := context.Background()
	_, err := dyn(t).Resource(pluginGVR).Create(ctx, clusterPlugin(t, obj), metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = dyn(t).Resource(pluginGVR).Delete(ctx, "shared-status", metav1.DeleteOptions{}) })

	// replicas reads status.replicas: each replica's units, sorted.
	replicas := func() (map[string][]string, string) {
		u, err := dyn(t).Resource(pluginGVR).Get(ctx, "shared-status", metav1.GetOptions{})
		must(t, err)
		m, _, _ := unstructured.NestedMap(u.Object, "status", "replicas")
		out := map[string][]string{}
		for id, e := range m {
			holds, _, _ := unstructured.NestedStringSlice(e.(map[string]any), "holds")
			out[id] = holds
		}
		ready := ""
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if c.(map[string]any)["type"] == "Ready" {
				ready = fmt.Sprint(c.(map[string]any)["status"])
			}
		}
		return out, ready
	}
	eventually(t, time.Minute, "two replicas holding a shard each in status.replicas, and Ready", func() error {
		r, ready := replicas()
		if len(r) != 2 || ready != "True" {
			return fmt.Errorf("status.replicas %v, Ready %q", r, ready)
		}
		for id, holds := range r {
			if len(holds) != 1 {
				return fmt.Errorf("%s holds %v", id, holds)
			}
		}
		return nil
	})
	waitSeen(t, []string{ns}, time.Minute)
	a.stop(t)
	eventually(t, time.Minute, "the stopped replica gone from status.replicas, the other holding both shards", func() error {
		r, _ := replicas()
		if len(r) != 1 {
			return fmt.Errorf("status.replicas %v", r)
		}
		for _, holds := range r {
			if !slices.Equal(holds, []string{"shared-status/0", "shared-status/1"}) {
				return fmt.Errorf("status.replicas %v", r)
			}
		}
		return nil
	})
}

// On an API server without the ShardedListAndWatch gate (a second control plane, as clusters
// have it by default), the shardSelector is ignored: each replica filters on its side, so it
// still reconciles and caches only its shard, and it says once that it receives every object.
func TestShardedPluginWithoutTheGate(t *testing.T) {
	plain, err := controlplane.Start(controlplane.Options{WithoutShardedLists: true})
	must(t, err)
	t.Cleanup(func() { _ = plain.Stop() })
	plainCfg := rest.CopyConfig(plain.Config)
	plainCfg.QPS, plainCfg.Burst = 200, 400
	cs := kubernetes.NewForConfigOrDie(plainCfg)
	var namespaces []string
	total := 0
	for range 10 {
		ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plain-"}}, metav1.CreateOptions{})
		must(t, err)
		namespaces = append(namespaces, ns.Name)
		for i := range 20 {
			_, err := cs.CoreV1().ConfigMaps(ns.Name).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"gen": "1"}}, metav1.CreateOptions{})
			must(t, err)
			total++
		}
	}
	list, err := cs.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{})
	must(t, err)
	if list.ShardInfo != nil {
		t.Fatal("the second control plane filters by shard: its gate is on")
	}
	config := "plugins:\n" + overlapPlugin(t, "plain", 2)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), plain.Kubeconfig, 0o600))
	set := newReplicaSet(t, config, "default")
	set.args = append(set.args, "--kubeconfig", filepath.Join(dir, "kubeconfig")) // the last --kubeconfig wins
	reps := []*hostReplica{set.start("a"), set.start("b")}
	set.waitSpread([]string{"plain/0", "plain/1"}, 1, 1, time.Minute)
	if seen := waitSeenOn(t, cs, namespaces, time.Minute); seen != total {
		t.Fatalf("%d ConfigMaps reconciled, want %d", seen, total)
	}
	cached := 0
	for _, r := range reps {
		n := cachedConfigMaps(t, r.metrics)
		cached += n
		if n >= len(list.Items) {
			t.Errorf("replica %s caches %d of %d ConfigMaps: the host did not filter", r.name, n, len(list.Items))
		}
		if c := strings.Count(r.h.out.String(), "does not filter by shard"); c != 1 {
			t.Errorf("replica %s said %d times that the API server does not filter; want once", r.name, c)
		}
	}
	if cached != len(list.Items) {
		t.Errorf("the replicas cache %d ConfigMaps together; the cluster has %d", cached, len(list.Items))
	}
	if _, overlaps := set.overlaps(); len(overlaps) > 0 {
		t.Errorf("overlaps: %v", overlaps)
	}
	report(t, "sharded plugin, API server without the gate: 2 replicas cache %d ConfigMaps of %d together, each its shard, filtered on the host", cached, len(list.Items))
}

// A replica paused past its Leases (SIGSTOP: a frozen container, a suspended VM) and resumed
// does not reconcile what another replica took meanwhile: before its renew-deadline timer
// fires, its reconciles and writes see that its hold on the plugins went stale. A reconcile
// that was in flight at the pause resumes too, but its writes are refused.
func TestPausedReplicaDoesNotActOnTakenPlugins(t *testing.T) {
	const plugins, perPlugin = 4, 20
	leaseNS := namespace(t)
	config, units, namespaces, cms := pluginsEach(t, "pause-%d", plugins, perPlugin)
	set := newReplicaSet(t, config, leaseNS)
	a, other := set.start("a"), set.start("b")
	set.waitSpread(units, 2, 2, time.Minute)
	waitSeen(t, namespaces, time.Minute)
	held := a.owned(t)
	w := startWriter(t, cms, 10*time.Millisecond)

	must(t, a.h.cmd.Process.Signal(syscall.SIGSTOP))
	eventually(t, 45*time.Second, "the other replica holds every plugin", func() error {
		if own := other.owned(t); len(own) != plugins {
			return fmt.Errorf("it holds %v", own)
		}
		return nil
	})
	time.Sleep(time.Second) // the other replica reconciles the paused one's keys
	resumed := time.Now()
	must(t, a.h.cmd.Process.Signal(syscall.SIGCONT))
	time.Sleep(3 * time.Second)
	w.halt()
	waitSeen(t, namespaces, time.Minute)

	// From the resume to its next take, a began no reconcile of a plugin it held before.
	var retook time.Time
	var stale []string
	for _, line := range strings.Split(a.h.out.String(), "\n") {
		var l struct {
			Time                 time.Time
			Msg, Plugin, Request string
		}
		if json.Unmarshal([]byte(line), &l) != nil || !l.Time.After(resumed) {
			continue
		}
		switch {
		case l.Msg == "took a unit: starting it" && retook.IsZero():
			retook = l.Time
		case l.Msg == "overlap begin" && retook.IsZero() && slices.Contains(held, l.Plugin):
			stale = append(stale, l.Time.Format("15:04:05.000000")+" "+l.Plugin+" "+l.Request)
		}
	}
	refused := 0.0
	for _, m := range samples(t, a.metrics, "wasmrec_plugin_host_calls_total") {
		if m.labels["status"] == "unavailable" {
			refused += m.value
		}
	}
	_, overlaps := set.overlaps()
	report(t, "paused replica: a held %v and was paused (SIGSTOP) until b took them; after the resume it began %d reconciles of them before taking a unit again; %.0f writes refused; %d reconciles in flight at the pause ran on beside b's",
		held, len(stale), refused, len(overlaps))
	for _, s := range stale {
		t.Error("the resumed replica reconciled a plugin taken over: " + s)
	}
}
