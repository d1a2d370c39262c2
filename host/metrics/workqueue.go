package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics implements client-go's workqueue.MetricsProvider with the metric names and
// buckets controller-runtime registers.
type queueMetrics struct {
	adds, retries           *prometheus.CounterVec
	depthGauge              *prometheus.GaugeVec
	latency, workDuration   *prometheus.HistogramVec
	unfinished, longestProc *prometheus.GaugeVec
}

var _ workqueue.MetricsProvider = (*queueMetrics)(nil)

func newQueueMetrics() queueMetrics {
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	return queueMetrics{
		depthGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of workqueue"}, []string{"name", "controller"}),
		adds:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Total number of adds handled by workqueue"}, []string{"name", "controller"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds",
			Help: "How long in seconds an item stays in workqueue before being requested", Buckets: buckets}, []string{"name", "controller"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds",
			Help: "How long in seconds processing an item from workqueue takes", Buckets: buckets}, []string{"name", "controller"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration"}, []string{"name", "controller"}),
		longestProc: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running"}, []string{"name", "controller"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Total number of retries handled by workqueue"}, []string{"name", "controller"}),
	}
}

func (q *queueMetrics) register(r *prometheus.Registry) {
	r.MustRegister(q.depthGauge, q.adds, q.latency, q.workDuration, q.unfinished, q.longestProc, q.retries)
}

// forget deletes the series of the queue name.
func (q *queueMetrics) forget(name string) {
	for _, v := range []*prometheus.MetricVec{q.depthGauge.MetricVec, q.adds.MetricVec, q.latency.MetricVec, q.workDuration.MetricVec,
		q.unfinished.MetricVec, q.longestProc.MetricVec, q.retries.MetricVec} {
		v.DeletePartialMatch(prometheus.Labels{"name": name})
	}
}

// NewDepthMetric is the depth of a new queue, which starts empty: a controller that restarts
// makes a new queue of the same name, and the one it shut down left the keys it dropped counted.
func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	g := q.depthGauge.WithLabelValues(name, name)
	g.Set(0)
	return g
}
func (q *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name, name)
}
func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name, name)
}
func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.workDuration.WithLabelValues(name, name)
}
func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	g := q.unfinished.WithLabelValues(name, name)
	g.Set(0) // as NewDepthMetric: what a queue shut down last said is not this one's
	return g
}
func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	g := q.longestProc.WithLabelValues(name, name)
	g.Set(0)
	return g
}
func (q *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name, name)
}
