package ctbpublisher

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// metrics are KCM's: syncs counted, and timed, by the HTTP code of their
// outcome (200 for success; an API error's code; 500 otherwise).
type metrics struct {
	syncs    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// metricsOn returns the metrics registered on reg (those an earlier term
// registered there, else new ones); on a nil reg, unregistered ones.
func metricsOn(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "clustertrustbundle_publisher", Name: "sync_total",
			Help: "Number of syncs that occurred in cluster trust bundle publisher.",
		}, []string{"code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "clustertrustbundle_publisher", Name: "sync_duration_seconds",
			Help:    "The time it took to sync a cluster trust bundle.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"code"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	if err := reg.Register(m.syncs); err != nil {
		existing, ok := alreadyRegistered[*prometheus.CounterVec](err)
		if !ok {
			errs = append(errs, fmt.Errorf("registering metrics: %w", err))
		}
		m.syncs = existing
	}
	if err := reg.Register(m.duration); err != nil {
		existing, ok := alreadyRegistered[*prometheus.HistogramVec](err)
		if !ok {
			errs = append(errs, fmt.Errorf("registering metrics: %w", err))
		}
		m.duration = existing
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

// observe records one sync that began at start and ended with err.
func (m *metrics) observe(start time.Time, err error) {
	code := "200"
	if err != nil {
		code = "500"
		if s, ok := errorsAsStatus(err); ok && s.Status().Code != 0 {
			code = strconv.Itoa(int(s.Status().Code))
		}
	}
	m.syncs.WithLabelValues(code).Inc()
	m.duration.WithLabelValues(code).Observe(time.Since(start).Seconds())
}

// errorsAsStatus is errors.As for the API's status errors.
func errorsAsStatus(err error) (apierrors.APIStatus, bool) {
	var s apierrors.APIStatus
	return s, errors.As(err, &s)
}
