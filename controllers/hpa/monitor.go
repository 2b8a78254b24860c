package hpa

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/ctrlhost/ctrlhost/controllers/internal/collectors"
)

// errSpec marks an error that comes from the HPA's spec (the error label
// "spec" rather than "internal").
var errSpec = errors.New("")

const monitorSubsystem = "horizontal_pod_autoscaler_controller"

// Labels of the monitor's metrics, as KCM's.
const (
	actionScaleUp   = "scale_up"
	actionScaleDown = "scale_down"
	actionNone      = "none"
	errorSpec       = "spec"
	errorInternal   = "internal"
	errorNone       = "none"
)

const labelsHelp = "The label 'action' should be either 'scale_down', 'scale_up', or " +
	"'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'."

// monitor is KCM's horizontal_pod_autoscaler_controller_* metrics, but
// the stale-sync skips (counted by the kit as
// workloop_stale_syncs_skipped_total).
type monitor struct {
	reconciliations *prometheus.CounterVec
	reconcileTime   *prometheus.HistogramVec
	computations    *prometheus.CounterVec
	computeTime     *prometheus.HistogramVec
	hpas            prometheus.Gauge
	desired         *prometheus.GaugeVec
}

// newMonitor returns the metrics registered on reg (those an earlier term
// registered there, else new ones; on a nil reg, unregistered ones), with
// the gauges reset: this term's informer counts its HPAs afresh.
func newMonitor(reg prometheus.Registerer) (*monitor, error) {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &monitor{
		reconciliations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: monitorSubsystem, Name: "reconciliations_total",
			Help: "Number of reconciliations of HPA controller. " + labelsHelp + " Note that " +
				"if both spec and internal errors happen during a reconciliation, the first " +
				"one to occur is reported in `error` label.",
		}, []string{"action", "error"}),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: monitorSubsystem, Name: "reconciliation_duration_seconds",
			Help: "The time(seconds) that the HPA controller takes to reconcile once. " +
				labelsHelp + " Note that if both spec and internal errors happen during a " +
				"reconciliation, the first one to occur is reported in `error` label.",
			Buckets: buckets,
		}, []string{"action", "error"}),
		computations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: monitorSubsystem, Name: "metric_computation_total",
			Help: "Number of metric computations. " + labelsHelp + " The label " +
				"'metric_type' corresponds to HPA.spec.metrics[*].type",
		}, []string{"action", "error", "metric_type"}),
		computeTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: monitorSubsystem, Name: "metric_computation_duration_seconds",
			Help: "The time(seconds) that the HPA controller takes to calculate one metric. " +
				labelsHelp + " The label 'metric_type' corresponds to " +
				"HPA.spec.metrics[*].type",
			Buckets: buckets,
		}, []string{"action", "error", "metric_type"}),
		hpas: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: monitorSubsystem, Name: "num_horizontal_pod_autoscalers",
			Help: "Current number of controlled HPA objects.",
		}),
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: monitorSubsystem, Name: "desired_replicas",
			Help: "Current desired replica count for HPA objects.",
		}, []string{"namespace", "hpa_name"}),
	}
	r := collectors.On(reg)
	collectors.Register(r, &m.reconciliations)
	collectors.Register(r, &m.reconcileTime)
	collectors.Register(r, &m.computations)
	collectors.Register(r, &m.computeTime)
	collectors.Register(r, &m.hpas)
	collectors.Register(r, &m.desired)
	if err := r.Err(); err != nil {
		return nil, err
	}
	m.hpas.Set(0)
	m.desired.Reset()
	return m, nil
}

func errorLabel(err error) string {
	switch {
	case err == nil:
		return errorNone
	case errors.Is(err, errSpec):
		return errorSpec
	}
	return errorInternal
}

func (m *monitor) reconciled(action string, err error, took time.Duration) {
	l := errorLabel(err)
	m.reconciliations.WithLabelValues(action, l).Inc()
	m.reconcileTime.WithLabelValues(action, l).Observe(took.Seconds())
}

// computed records one metric's computation: scaling up or down when its
// proposal is above or below the status's current replicas.
func (m *monitor) computed(proposal, current int32, err error, took time.Duration,
	t autoscalingv2.MetricSourceType) {
	action := actionNone
	switch {
	case err != nil:
	case proposal > current:
		action = actionScaleUp
	case proposal < current:
		action = actionScaleDown
	}
	l := errorLabel(err)
	m.computations.WithLabelValues(action, l, string(t)).Inc()
	m.computeTime.WithLabelValues(action, l, string(t)).Observe(took.Seconds())
}
