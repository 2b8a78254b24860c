package workloop

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The kit's counters exist from program start, as client-go's workqueue
// metrics do, but reach no registry until RegisterMetrics is called.
var (
	panicsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workloop_sync_panics_total",
		Help: "Panics recovered from a controller's sync function.",
	}, []string{"controller"})
	staleSkipsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workloop_stale_syncs_skipped_total",
		Help: "Syncs skipped because the informer had not yet delivered the controller's own writes.",
	}, []string{"controller"})
)

// RegisterMetrics registers the kit's counters with reg. Registering twice
// with the same registry is not an error.
func RegisterMetrics(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{panicsTotal, staleSkipsTotal} {
		if err := reg.Register(c); err != nil {
			if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
				continue
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
