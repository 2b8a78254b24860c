package workloop

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The package's metrics are process-wide, like client-go's workqueue
// metrics, and labelled with the loop's name. Nothing is registered at
// import time: RegisterMetrics adds them to a registry.
var (
	syncPanics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workloop_sync_panics_total",
		Help: "Panics recovered in a work loop's sync function; the key was requeued.",
	}, []string{"name"})
	staleSkips = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workloop_stale_skips_total",
		Help: "Syncs skipped because the informer had not caught up with the controller's own last write (staleness guard).",
	}, []string{"name", "resource"})
)

// RegisterMetrics registers the package's metrics in reg. Registering them
// again in the same registry (two Managers sharing one) is not an error.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{syncPanics, staleSkips} {
		var already prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !(errors.As(err, &already) && already.ExistingCollector == c) {
			return err
		}
	}
	return nil
}

// zeroMetrics creates the loop's panic series at zero, so that it is
// scraped before anything happened.
func (l *Loop[K]) zeroMetrics() {
	syncPanics.WithLabelValues(l.name)
}
