package tainteviction

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlhost/ctrlhost/controllers/internal/collectors"
)

// metrics are KCM's: pods deleted, and the time from a deletion's due
// time to its success.
type metrics struct {
	deletions prometheus.Counter
	latency   prometheus.Histogram
}

// metricsOn returns the metrics registered on reg (those an earlier term
// registered there, else new ones); on a nil reg, unregistered ones.
func metricsOn(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deletions: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "taint_eviction_controller", Name: "pod_deletions_total",
			Help: "Total number of Pods deleted by TaintEvictionController since its start.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "taint_eviction_controller", Name: "pod_deletion_duration_seconds",
			Help: "Latency, in seconds, between the time when a taint effect has been " +
				"activated for the Pod and its deletion via TaintEvictionController.",
			Buckets: []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240},
		}),
	}
	r := collectors.On(reg)
	collectors.Register(r, &m.deletions)
	collectors.Register(r, &m.latency)
	if err := r.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
