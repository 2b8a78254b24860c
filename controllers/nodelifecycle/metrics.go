package nodelifecycle

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlhost/ctrlhost/controllers/internal/collectors"
)

// metrics are KCM's node_collector series.
type metrics struct {
	zoneHealth     *prometheus.GaugeVec
	zoneSize       *prometheus.GaugeVec
	unhealthyNodes *prometheus.GaugeVec
	evictions      *prometheus.CounterVec
	nodeHealth     prometheus.Histogram
	allNodesHealth prometheus.Histogram
}

const subsystem = "node_collector"

func newMetrics() *metrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: subsystem,
			Name: name, Help: help}, []string{"zone"})
	}
	return &metrics{
		zoneHealth: gauge("zone_health",
			"Gauge measuring percentage of healthy nodes per zone."),
		zoneSize: gauge("zone_size",
			"Gauge measuring number of registered Nodes per zones."),
		unhealthyNodes: gauge("unhealthy_nodes_in_zone",
			"Gauge measuring number of not Ready Nodes per zones."),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: subsystem,
			Name: "evictions_total",
			Help: "Number of Node evictions that happened since current instance of " +
				"NodeController started."}, []string{"zone"}),
		nodeHealth: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: subsystem,
			Name: "update_node_health_duration_seconds",
			Help: "Duration in seconds for NodeController to update the health of a " +
				"single node.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
		allNodesHealth: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "update_all_nodes_health_duration_seconds",
			Help: "Duration in seconds for NodeController to update the health of all " +
				"nodes.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}),
	}
}

// metricsOn returns the metrics registered on reg: those an earlier term
// registered there, else new ones; on a nil reg, unregistered ones.
func metricsOn(reg prometheus.Registerer) (*metrics, error) {
	m := newMetrics()
	r := collectors.On(reg)
	collectors.Register(r, &m.zoneHealth)
	collectors.Register(r, &m.zoneSize)
	collectors.Register(r, &m.unhealthyNodes)
	collectors.Register(r, &m.evictions)
	collectors.Register(r, &m.nodeHealth)
	collectors.Register(r, &m.allNodesHealth)
	if err := r.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
