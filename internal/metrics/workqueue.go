package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Work queue metrics, named as kube-controller-manager exposes them (the
// names and buckets of k8s.io/component-base/metrics/prometheus/workqueue).
// Process-wide; see the package documentation.
var (
	// queueBuckets are 10ns to 10s (upper bounds 1e-8 … 10).
	queueBuckets = prometheus.ExponentialBuckets(10e-9, 10, 10)

	workqueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue",
		Name:      "depth",
		Help:      "Current depth of workqueue",
	}, []string{"name"})

	workqueueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue",
		Name:      "adds_total",
		Help:      "Total number of adds handled by workqueue",
	}, []string{"name"})

	workqueueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue",
		Name:      "queue_duration_seconds",
		Help:      "How long in seconds an item stays in workqueue before being requested.",
		Buckets:   queueBuckets,
	}, []string{"name"})

	workqueueWorkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue",
		Name:      "work_duration_seconds",
		Help:      "How long in seconds processing an item from workqueue takes.",
		Buckets:   queueBuckets,
	}, []string{"name"})

	workqueueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue",
		Name:      "unfinished_work_seconds",
		Help: "How many seconds of work has been done that is in progress and " +
			"hasn't been observed by work_duration. Large values indicate stuck " +
			"threads. One can deduce the number of stuck threads by observing " +
			"the rate at which this increases.",
	}, []string{"name"})

	workqueueLongestRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue",
		Name:      "longest_running_processor_seconds",
		Help:      "How many seconds has the longest running processor for workqueue been running.",
	}, []string{"name"})

	workqueueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue",
		Name:      "retries_total",
		Help:      "Total number of retries handled by workqueue",
	}, []string{"name"})

	workqueueCollectors = []prometheus.Collector{
		workqueueDepth, workqueueAdds, workqueueLatency, workqueueWorkDuration,
		workqueueUnfinished, workqueueLongestRunning, workqueueRetries,
	}
)

// workqueueProvider hands client-go the process-wide work queue series of
// the queue with the given name.
type workqueueProvider struct{}

var _ workqueue.MetricsProvider = workqueueProvider{}

// WorkqueueProvider returns the provider InstallClientGoProviders installs,
// for a queue that should report here regardless of the global hook:
//
//	workqueue.NewTypedRateLimitingQueueWithConfig(rl,
//		workqueue.TypedRateLimitingQueueConfig[string]{Name: "foo", MetricsProvider:
//
// metrics.WorkqueueProvider()})
//
// Unnamed queues report nothing.
func WorkqueueProvider() workqueue.MetricsProvider { return workqueueProvider{} }

func (workqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return workqueueDepth.WithLabelValues(name)
}

func (workqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return workqueueAdds.WithLabelValues(name)
}

func (workqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return workqueueLatency.WithLabelValues(name)
}

func (workqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return workqueueWorkDuration.WithLabelValues(name)
}

func (workqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return workqueueUnfinished.WithLabelValues(name)
}

func (workqueueProvider) NewLongestRunningProcessorSecondsMetric(
	name string,
) workqueue.SettableGaugeMetric {
	return workqueueLongestRunning.WithLabelValues(name)
}

func (workqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return workqueueRetries.WithLabelValues(name)
}
