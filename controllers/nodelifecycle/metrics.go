package nodelifecycle

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	if reg == nil {
		return m, nil
	}
	var errs []error
	m.zoneHealth = register(reg, m.zoneHealth, &errs)
	m.zoneSize = register(reg, m.zoneSize, &errs)
	m.unhealthyNodes = register(reg, m.unhealthyNodes, &errs)
	m.evictions = register(reg, m.evictions, &errs)
	m.nodeHealth = register(reg, m.nodeHealth, &errs)
	m.allNodesHealth = register(reg, m.allNodesHealth, &errs)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// register registers c on reg, or returns the collector of its kind
// registered there already.
func register[T prometheus.Collector](reg prometheus.Registerer, c T, errs *[]error) T {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	*errs = append(*errs, fmt.Errorf("registering metrics: %w", err))
	return c
}
