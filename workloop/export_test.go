package workloop

import "github.com/prometheus/client_golang/prometheus"

// Test hooks into the process-wide counters.
func PanicsCounter(name string) prometheus.Counter { return syncPanics.WithLabelValues(name) }

func StaleCounter(name, resource string) prometheus.Counter {
	return staleSkips.WithLabelValues(name, resource)
}
