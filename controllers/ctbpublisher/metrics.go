package ctbpublisher

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ctrlhost/ctrlhost/controllers/internal/collectors"
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
	r := collectors.On(reg)
	collectors.Register(r, &m.syncs)
	collectors.Register(r, &m.duration)
	if err := r.Err(); err != nil {
		return nil, err
	}
	return m, nil
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
