package workloop

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are the kit's counters, as registered on one registry.
type counters struct {
	panics, staleSkips, staleExpired *prometheus.CounterVec
}

func newCounters() *counters {
	return &counters{
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workloop_sync_panics_total",
			Help: "Panics recovered from a controller's sync function.",
		}, []string{"controller"}),
		staleSkips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workloop_stale_syncs_skipped_total",
			Help: "Syncs skipped because the informer had not yet delivered the controller's own writes.",
		}, []string{"controller"}),
		staleExpired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workloop_stale_writes_expired_total",
			Help: "Writes no informer delivered within the staleness guard's timeout: their key " +
				"was held back that long (a lagging informer, or a handler that does not call Observe).",
		}, []string{"controller"}),
	}
}

// processCounters count for the loops created without Options.Metrics.
// They exist from program start, as client-go's workqueue metrics do, and
// reach a registry only through RegisterMetrics.
var processCounters = newCounters()

// countersOn returns the kit's counters on reg: those an earlier loop (or
// RegisterMetrics) registered there, else new ones, registered now. Two
// Managers in one process, each with its registry, so count apart.
func countersOn(reg prometheus.Registerer) (*counters, error) {
	c := newCounters()
	var errs []error
	c.panics = registerVec(reg, c.panics, &errs)
	c.staleSkips = registerVec(reg, c.staleSkips, &errs)
	c.staleExpired = registerVec(reg, c.staleExpired, &errs)
	return c, errors.Join(errs...)
}

// registerVec registers vec with reg, or returns the counter of that name
// registered there already.
func registerVec(
	reg prometheus.Registerer,
	vec *prometheus.CounterVec,
	errs *[]error,
) *prometheus.CounterVec {
	err := reg.Register(vec)
	if err == nil {
		return vec
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing
		}
	}
	*errs = append(*errs, err)
	return vec
}

// RegisterMetrics registers with reg the counters of the loops created
// without Options.Metrics, which are process-wide: a program that runs its
// loops without a Manager calls it once. Loops given Options.Metrics count
// on that registry instead (the Manager's, through descriptor.Context's
// Metrics). Registering twice with the same registry is not an error.
func RegisterMetrics(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{processCounters.panics, processCounters.staleSkips,
		processCounters.staleExpired} {
		if err := reg.Register(c); err != nil {
			if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
				continue
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("workloop: registering metrics: %w", errors.Join(errs...))
	}
	return nil
}
