package tainteviction

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	if reg == nil {
		return m, nil
	}
	var errs []error
	if err := reg.Register(m.deletions); err != nil {
		existing, ok := alreadyRegistered[prometheus.Counter](err)
		if !ok {
			errs = append(errs, fmt.Errorf("registering metrics: %w", err))
		}
		m.deletions = existing
	}
	if err := reg.Register(m.latency); err != nil {
		existing, ok := alreadyRegistered[prometheus.Histogram](err)
		if !ok {
			errs = append(errs, fmt.Errorf("registering metrics: %w", err))
		}
		m.latency = existing
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// alreadyRegistered returns the collector of type T that err says is
// registered already.
func alreadyRegistered[T prometheus.Collector](err error) (T, bool) {
	var zero T
	are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
	if !ok {
		return zero, false
	}
	c, ok := are.ExistingCollector.(T)
	return c, ok
}
