package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/util/workqueue"
)

// Metrics is a host's registry and its collectors.
type Metrics struct {
	Registry *prometheus.Registry

	reconcileTotal  *prometheus.CounterVec
	reconcileErrors *prometheus.CounterVec
	terminalErrors  *prometheus.CounterVec
	panics          *prometheus.CounterVec
	reconcileTime   *prometheus.HistogramVec
	maxWorkers      *prometheus.GaugeVec
	activeWorkers   *prometheus.GaugeVec

	queue queueMetrics

	// HostCalls counts guest-to-host calls by plugin, function and status.
	HostCalls *prometheus.CounterVec
	// Maps counts the objects of watched kinds plugins' map functions mapped, by outcome: ok,
	// error, timeout, and skipped (a version of an object whose map timed out before).
	Maps *prometheus.CounterVec
	// Swaps counts module swaps by plugin and outcome.
	Swaps *prometheus.CounterVec
	// WriteLimitWaits and WriteLimitWaitSeconds count the writes that waited on their plugin's
	// own write rate limit, and how long they waited; ReadLimitWaits and ReadLimitWaitSeconds
	// the same for reads.
	WriteLimitWaits, WriteLimitWaitSeconds, ReadLimitWaits, ReadLimitWaitSeconds *prometheus.CounterVec
	// Compiles counts module compilations by plugin: loads and swaps that compiled a module.
	Compiles *prometheus.CounterVec
	// Running is 1 while a plugin's controller runs, 0 while it waits for its kinds to be
	// served (its CRD is missing) or for leadership.
	Running *prometheus.GaugeVec
	// ShardOwned is 1 for each plugin and shard this replica holds, 0 for those it shares with
	// other replicas and does not hold (shard "1/3", or "" for a plugin not split).
	ShardOwned *prometheus.GaugeVec
	// RolloutStep is 1 for the step a plugin's rollout is at ("shadow", "canary 25%"), while
	// one runs.
	RolloutStep *prometheus.GaugeVec
	// RolloutReconciles counts the reconciles of a rollout's versions ("live", "candidate") by
	// outcome (ok, error, panic, timeout); a shadowed reconcile counts for both.
	RolloutReconciles *prometheus.CounterVec
	// ShadowDifferences counts the shadow step's comparisons: "compared", and those whose
	// "writes" or "result" differ.
	ShadowDifferences *prometheus.CounterVec
	// Rollouts counts the rollouts that ended, by outcome: promoted, rolled_back, aborted.
	Rollouts *prometheus.CounterVec
	plugins  *pluginCollector
}

// New returns metrics registered in a fresh registry, with the Go and process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_total", Help: "Total number of reconciliations per controller",
		}, []string{"controller", "result"}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_errors_total", Help: "Total number of reconciliation errors per controller",
		}, []string{"controller"}),
		terminalErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_terminal_reconcile_errors_total", Help: "Total number of terminal reconciliation errors per controller",
		}, []string{"controller"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_panics_total", Help: "Total number of reconciliation panics per controller",
		}, []string{"controller"}),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "controller_runtime_reconcile_time_seconds", Help: "Length of time per reconciliation per controller",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
				1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60},
		}, []string{"controller"}),
		maxWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_max_concurrent_reconciles", Help: "Maximum number of concurrent reconciles per controller",
		}, []string{"controller"}),
		activeWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_active_workers", Help: "Number of currently used workers per controller",
		}, []string{"controller"}),
		HostCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_plugin_host_calls_total", Help: "Calls from plugins to the host, by plugin, function and status",
		}, []string{"plugin", "function", "status"}),
		Maps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_plugin_maps_total", Help: "Objects of watched kinds mapped by a plugin's own map function, by plugin and outcome (ok, error, timeout, throttled: no CPU slot of its share free before its timeout, tried again later; skipped: a version of an object whose map timed out before)",
		}, []string{"plugin", "outcome"}),
		Swaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_plugin_swaps_total", Help: "Module swaps by plugin and outcome",
		}, []string{"plugin", "outcome"}),
		WriteLimitWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_plugin_write_limit_waits_total", Help: "API writes a plugin made that waited on its own write rate limit",
		}, []string{"plugin"}),
		WriteLimitWaitSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_plugin_write_limit_wait_seconds_total", Help: "Time a plugin's API writes spent waiting on its own write rate limit",
		}, []string{"plugin"}),
		ReadLimitWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_plugin_read_limit_waits_total", Help: "Reads (get, list) a plugin made that waited on its own read rate limit",
		}, []string{"plugin"}),
		ReadLimitWaitSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_plugin_read_limit_wait_seconds_total", Help: "Time a plugin's reads spent waiting on its own read rate limit",
		}, []string{"plugin"}),
		Compiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_plugin_module_compiles_total", Help: "Modules compiled for a plugin, at load and at swaps (a swap back to a version kept compiled compiles nothing)",
		}, []string{"plugin"}),
		ShardOwned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmrec_plugin_shard_owned", Help: "1 if this replica holds the plugin's shard (shard \"1/3\", or \"\" for a plugin not split), 0 if another replica may",
		}, []string{"plugin", "shard"}),
		Running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmrec_plugin_running", Help: "1 while a plugin's controller runs; 0 while it waits for its CRDs or for leadership",
		}, []string{"plugin"}),
		RolloutStep: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmrec_rollout_step", Help: "1 for the step a plugin's rollout of a new module version is at (shadow, canary N%), while one runs",
		}, []string{"plugin", "step"}),
		RolloutReconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_rollout_reconciles_total", Help: "Reconciles during rollouts, by plugin, version (live, candidate) and outcome (ok, error, panic, timeout)",
		}, []string{"plugin", "version", "outcome"}),
		ShadowDifferences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_rollout_shadow_comparisons_total", Help: "Shadow reconciles compared with the live version's, by plugin and what was found: compared, writes (differ), result (differs)",
		}, []string{"plugin", "found"}),
		Rollouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmrec_rollouts_total", Help: "Rollouts of new module versions that ended, by plugin and outcome: promoted, rolled_back, aborted",
		}, []string{"plugin", "outcome"}),
		queue:   newQueueMetrics(),
		plugins: newPluginCollector(),
	}
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.reconcileTotal, m.reconcileErrors, m.terminalErrors, m.panics, m.reconcileTime, m.maxWorkers, m.activeWorkers,
		m.HostCalls, m.Maps, m.Swaps, m.WriteLimitWaits, m.WriteLimitWaitSeconds, m.ReadLimitWaits, m.ReadLimitWaitSeconds, m.Compiles, m.Running, m.ShardOwned,
		m.RolloutStep, m.RolloutReconciles, m.ShadowDifferences, m.Rollouts, m.plugins)
	m.queue.register(r)
	return m
}

// Forget deletes every series of the plugin or controller name: its reconciles, workqueue, host
// calls, swaps, rollouts and collected stats. Call it once the plugin is gone for good (its
// object deleted), not on a reload: without it, every plugin ever run kept its series, and a
// tenant creating and deleting objects grew the scrape without bound.
func (m *Metrics) Forget(name string) {
	for _, v := range []*prometheus.MetricVec{m.reconcileTotal.MetricVec, m.reconcileErrors.MetricVec, m.terminalErrors.MetricVec,
		m.panics.MetricVec, m.reconcileTime.MetricVec, m.maxWorkers.MetricVec, m.activeWorkers.MetricVec} {
		v.DeletePartialMatch(prometheus.Labels{"controller": name})
	}
	for _, v := range []*prometheus.MetricVec{m.HostCalls.MetricVec, m.Swaps.MetricVec, m.WriteLimitWaits.MetricVec, m.WriteLimitWaitSeconds.MetricVec,
		m.ReadLimitWaits.MetricVec, m.ReadLimitWaitSeconds.MetricVec, m.Compiles.MetricVec, m.Running.MetricVec, m.ShardOwned.MetricVec,
		m.RolloutStep.MetricVec, m.RolloutReconciles.MetricVec, m.ShadowDifferences.MetricVec, m.Rollouts.MetricVec} {
		v.DeletePartialMatch(prometheus.Labels{"plugin": name})
	}
	m.queue.forget(name)
	m.UnregisterPlugin(name)
}

// WatchDiscovery reports wasmrec_discovery_requests_total: the requests the host's RESTMapper
// sent to the API server, as requests counts them.
func (m *Metrics) WatchDiscovery(requests func() uint64) {
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "wasmrec_discovery_requests_total", Help: "Discovery requests the host sent to the API server to resolve kinds",
	}, func() float64 { return float64(requests()) }))
}

// WatchInformers reports wasmrec_informers_failing: how many informers' list/watch fail now, as
// failing counts them.
func (m *Metrics) WatchInformers(failing func() int) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "wasmrec_informers_failing", Help: "Informers whose list/watch against the API server fails now",
	}, func() float64 { return float64(failing()) }))
}

// WatchAPIServer reports wasmrec_apiserver_ready: 1 while the API server's own /readyz passes
// (or cannot be asked), 0 while it fails (its etcd gone, say), as ready tells.
func (m *Metrics) WatchAPIServer(ready func() bool) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "wasmrec_apiserver_ready", Help: "1 while the API server's own readiness checks (/readyz) pass, 0 while they fail (its etcd gone, say)",
	}, func() float64 {
		if ready() {
			return 1
		}
		return 0
	}))
}

// InformerObjects is what one shared informer holds.
type InformerObjects struct {
	Kind, Namespace, Shard string
	Objects                int
}

// WatchInformerObjects reports wasmrec_informer_objects: the objects each shared informer holds
// now, by kind, namespace and shard ("" for all), as objects lists them.
func (m *Metrics) WatchInformerObjects(objects func() []InformerObjects) {
	m.Registry.MustRegister(&informerObjects{list: objects, desc: prometheus.NewDesc("wasmrec_informer_objects",
		"Objects the host's shared informers hold now, by kind, namespace and shard (\"\" for all)", []string{"kind", "namespace", "shard"}, nil)})
}

type informerObjects struct {
	list func() []InformerObjects
	desc *prometheus.Desc
}

func (c *informerObjects) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *informerObjects) Collect(ch chan<- prometheus.Metric) {
	sums := map[[3]string]int{} // a full and a metadata-only informer of a kind add up
	for _, o := range c.list() {
		sums[[3]string{o.Kind, o.Namespace, o.Shard}] += o.Objects
	}
	for k, n := range sums {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// WorkqueueProvider makes queues report workqueue_* metrics labelled with their name.
func (m *Metrics) WorkqueueProvider() workqueue.MetricsProvider { return &m.queue }

// Controller returns the recorder of one controller. Its counters start at 0, each result
// included, as controller-runtime's do: a controller that has never failed shows an error rate
// of 0, not no data, and rate() sees its first error.
func (m *Metrics) Controller(name string) *ControllerRecorder {
	for _, result := range []string{"success", "error", "requeue", "requeue_after"} {
		m.reconcileTotal.WithLabelValues(name, result)
	}
	m.reconcileErrors.WithLabelValues(name)
	m.terminalErrors.WithLabelValues(name)
	m.panics.WithLabelValues(name)
	return &ControllerRecorder{m: m, name: name, active: m.activeWorkers.WithLabelValues(name), time: m.reconcileTime.WithLabelValues(name)}
}

// ControllerRecorder records one controller's reconciles. It implements controller.Recorder.
type ControllerRecorder struct {
	m      *Metrics
	name   string
	active prometheus.Gauge
	time   prometheus.Observer
}

// SetMaxWorkers sets controller_runtime_max_concurrent_reconciles.
func (c *ControllerRecorder) SetMaxWorkers(n int) {
	c.m.maxWorkers.WithLabelValues(c.name).Set(float64(n))
}

// WorkerStarted counts a busy worker.
func (c *ControllerRecorder) WorkerStarted() { c.active.Inc() }

// WorkerFinished counts a worker that is free again.
func (c *ControllerRecorder) WorkerFinished() { c.active.Dec() }

// Reconciled records an outcome: result is success, error, requeue or requeue_after.
func (c *ControllerRecorder) Reconciled(result string, terminal, panicked bool, took time.Duration) {
	c.m.reconcileTotal.WithLabelValues(c.name, result).Inc()
	if result == "error" {
		c.m.reconcileErrors.WithLabelValues(c.name).Inc()
	}
	if terminal {
		c.m.terminalErrors.WithLabelValues(c.name).Inc()
	}
	if panicked {
		c.m.panics.WithLabelValues(c.name).Inc()
	}
	c.time.Observe(took.Seconds())
}

// BudgetUse is what the plugin objects of one namespace ("" for the ClusterPlugins) hold of the
// operator's budgets for them: memory (their instances' share and compiled code, and their
// field indexes' values) and units.
type BudgetUse struct {
	Namespace   string
	MemoryBytes int64
	// PromisedBytes is the part of MemoryBytes that objects still waiting to load hold for
	// their instances: no instance uses it yet, and another's module may compile into it.
	PromisedBytes int64
	Units         int
}

// Budgets are the operator's budgets for plugin objects (pluginObjects in the host config): in
// all, and for the Plugins of one namespace.
type Budgets struct {
	MemoryBytes, NamespaceMemoryBytes int64
	Units, NamespaceUnits             int
}

// WatchPluginObjectBudgets reports what plugin objects hold of their budgets, as use lists it
// at each scrape: wasmrec_plugin_objects_memory_bytes (and the part of it only promised,
// wasmrec_plugin_objects_memory_promised_bytes) and wasmrec_plugin_objects_units by
// namespace ("" for the ClusterPlugins; their sum is what the whole budget counts), and the
// budgets, wasmrec_plugin_objects_memory_budget_bytes and wasmrec_plugin_objects_units_budget,
// by scope ("all", or "namespace": each namespace's).
func (m *Metrics) WatchPluginObjectBudgets(budgets Budgets, use func() []BudgetUse) {
	m.Registry.MustRegister(&budgetCollector{budgets: budgets, use: use,
		memory: prometheus.NewDesc("wasmrec_plugin_objects_memory_bytes",
			"Memory the plugin objects of a namespace (\"\" for the ClusterPlugins) hold of the operator's budgets: their instances' share, their compiled code and their field indexes' values", []string{"namespace"}, nil),
		promised: prometheus.NewDesc("wasmrec_plugin_objects_memory_promised_bytes",
			"The part of wasmrec_plugin_objects_memory_bytes that plugin objects still waiting to load hold for their instances: no instance uses it yet, and other objects' modules may compile into it, so the sum may pass the budget by it", []string{"namespace"}, nil),
		units: prometheus.NewDesc("wasmrec_plugin_objects_units",
			"Units of work the plugin objects of a namespace (\"\" for the ClusterPlugins) hold of the operator's budgets: one an object, or one a shard", []string{"namespace"}, nil),
		memoryBudget: prometheus.NewDesc("wasmrec_plugin_objects_memory_budget_bytes",
			"The operator's memory budget for plugin objects: in all (scope \"all\"), or for the Plugins of each namespace (scope \"namespace\")", []string{"scope"}, nil),
		unitsBudget: prometheus.NewDesc("wasmrec_plugin_objects_units_budget",
			"The operator's budget of units for plugin objects: in all (scope \"all\"), or for the Plugins of each namespace (scope \"namespace\")", []string{"scope"}, nil),
	})
}

type budgetCollector struct {
	budgets                                            Budgets
	use                                                func() []BudgetUse
	memory, promised, units, memoryBudget, unitsBudget *prometheus.Desc
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.memory
	ch <- c.promised
	ch <- c.units
	ch <- c.memoryBudget
	ch <- c.unitsBudget
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c.use() {
		ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(u.MemoryBytes), u.Namespace)
		ch <- prometheus.MustNewConstMetric(c.promised, prometheus.GaugeValue, float64(u.PromisedBytes), u.Namespace)
		ch <- prometheus.MustNewConstMetric(c.units, prometheus.GaugeValue, float64(u.Units), u.Namespace)
	}
	ch <- prometheus.MustNewConstMetric(c.memoryBudget, prometheus.GaugeValue, float64(c.budgets.MemoryBytes), "all")
	ch <- prometheus.MustNewConstMetric(c.memoryBudget, prometheus.GaugeValue, float64(c.budgets.NamespaceMemoryBytes), "namespace")
	ch <- prometheus.MustNewConstMetric(c.unitsBudget, prometheus.GaugeValue, float64(c.budgets.Units), "all")
	ch <- prometheus.MustNewConstMetric(c.unitsBudget, prometheus.GaugeValue, float64(c.budgets.NamespaceUnits), "namespace")
}
