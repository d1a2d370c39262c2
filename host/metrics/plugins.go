package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// PluginStats is what the plugin collector reads from a running plugin at each scrape.
type PluginStats struct {
	Digest                       string
	Instances                    int    // alive, idle or busy
	InstanceMemoryBytes          uint64 // of the idle instances
	SnapshotBytes                int64  // its module's snapshot, kept until its code is let go
	Traps, Timeouts, BadResults  int64
	Instantiated, Discarded, Rec int64 // Rec: recycled
	LogDroppedLines              int64 // guest output past the plugin's log limit
	LogDroppedBytes              int64
	// IndexBytes is what the serving version's field indexes keep (their values the guest
	// told); IndexRefusals counts the times the memory budget refused them a charge.
	IndexBytes, IndexRefusals int64
	// Records says the plugin records its reconciles; then Recordings were written,
	// RecordingsDropped dropped (the writer behind), and RecordingsBytes are on disk.
	Records                                        bool
	Recordings, RecordingsDropped, RecordingsBytes int64
}

// pluginCollector reports wasmrec_plugin_* from the registered plugins.
type pluginCollector struct {
	mu      sync.Mutex
	plugins map[string]func() PluginStats

	info, instances, memory, snapshot, traps, timeouts, badResults, instantiated, discarded, recycled, droppedLines, droppedBytes *prometheus.Desc
	recordings, recordingsDropped, recordingsBytes                                                                                *prometheus.Desc
	indexBytes, indexRefusals                                                                                                     *prometheus.Desc
}

func newPluginCollector() *pluginCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{"plugin"}, labels...), nil)
	}
	return &pluginCollector{
		plugins:      map[string]func() PluginStats{},
		info:         d("wasmrec_plugin_info", "The module a plugin runs (value 1)", "digest"),
		instances:    d("wasmrec_plugin_instances", "Live instances of a plugin's module"),
		memory:       d("wasmrec_plugin_instance_memory_bytes", "Linear memory of a plugin's idle instances"),
		snapshot:     d("wasmrec_plugin_snapshot_bytes", "Memory a plugin's module keeps of its snapshot (what its initialisation wrote, from which instances start) until its code is let go"),
		traps:        d("wasmrec_plugin_traps_total", "Reconciles that trapped"),
		timeouts:     d("wasmrec_plugin_timeouts_total", "Reconciles interrupted at their deadline"),
		badResults:   d("wasmrec_plugin_bad_results_total", "Reconciles that returned a malformed result"),
		instantiated: d("wasmrec_plugin_instantiations_total", "Instances created"),
		discarded:    d("wasmrec_plugin_instances_discarded_total", "Instances thrown away after a fault"),
		recycled:     d("wasmrec_plugin_instances_recycled_total", "Instances replaced because their memory, or the steps they recorded, grew past the bound"),
		droppedLines: d("wasmrec_plugin_log_dropped_lines_total", "Lines of a plugin's output dropped past its log limit"),
		droppedBytes: d("wasmrec_plugin_log_dropped_bytes_total", "Bytes of a plugin's output dropped past its log limit"),

		indexBytes:    d("wasmrec_plugin_index_bytes", "What the host keeps of the values of a plugin's field indexes, for its serving version"),
		indexRefusals: d("wasmrec_plugin_index_refusals_total", "Times the memory budget had no room for a plugin's field index values (the host then keeps none, and its lists hand it every item)"),

		recordings:        d("wasmrec_plugin_recordings_total", "Reconciles of a plugin recorded (its settings' record)"),
		recordingsDropped: d("wasmrec_plugin_recordings_dropped_total", "Reconciles its settings keep that were not recorded: the writer was behind"),
		recordingsBytes:   d("wasmrec_plugin_recordings_bytes", "What a plugin's recordings take on disk"),
	}
}

// RegisterPlugin makes the collector report a plugin; stats is called at each scrape.
func (m *Metrics) RegisterPlugin(name string, stats func() PluginStats) {
	m.plugins.mu.Lock()
	defer m.plugins.mu.Unlock()
	m.plugins.plugins[name] = stats
}

// UnregisterPlugin stops reporting a plugin.
func (m *Metrics) UnregisterPlugin(name string) {
	m.plugins.mu.Lock()
	defer m.plugins.mu.Unlock()
	delete(m.plugins.plugins, name)
}

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.instances, c.memory, c.snapshot, c.traps, c.timeouts, c.badResults, c.instantiated, c.discarded, c.recycled, c.droppedLines, c.droppedBytes, c.indexBytes, c.indexRefusals, c.recordings, c.recordingsDropped, c.recordingsBytes} {
		ch <- d
	}
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, stats := range c.plugins {
		s := stats()
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, name, s.Digest)
		ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(s.Instances), name)
		ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(s.InstanceMemoryBytes), name)
		ch <- prometheus.MustNewConstMetric(c.snapshot, prometheus.GaugeValue, float64(s.SnapshotBytes), name)
		ch <- prometheus.MustNewConstMetric(c.traps, prometheus.CounterValue, float64(s.Traps), name)
		ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(s.Timeouts), name)
		ch <- prometheus.MustNewConstMetric(c.badResults, prometheus.CounterValue, float64(s.BadResults), name)
		ch <- prometheus.MustNewConstMetric(c.instantiated, prometheus.CounterValue, float64(s.Instantiated), name)
		ch <- prometheus.MustNewConstMetric(c.discarded, prometheus.CounterValue, float64(s.Discarded), name)
		ch <- prometheus.MustNewConstMetric(c.recycled, prometheus.CounterValue, float64(s.Rec), name)
		ch <- prometheus.MustNewConstMetric(c.droppedLines, prometheus.CounterValue, float64(s.LogDroppedLines), name)
		ch <- prometheus.MustNewConstMetric(c.droppedBytes, prometheus.CounterValue, float64(s.LogDroppedBytes), name)
		ch <- prometheus.MustNewConstMetric(c.indexBytes, prometheus.GaugeValue, float64(s.IndexBytes), name)
		ch <- prometheus.MustNewConstMetric(c.indexRefusals, prometheus.CounterValue, float64(s.IndexRefusals), name)
		if s.Records {
			ch <- prometheus.MustNewConstMetric(c.recordings, prometheus.CounterValue, float64(s.Recordings), name)
			ch <- prometheus.MustNewConstMetric(c.recordingsDropped, prometheus.CounterValue, float64(s.RecordingsDropped), name)
			ch <- prometheus.MustNewConstMetric(c.recordingsBytes, prometheus.GaugeValue, float64(s.RecordingsBytes), name)
		}
	}
}
