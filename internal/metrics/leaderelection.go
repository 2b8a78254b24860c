package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
)

// Leader election metrics, named as client-go's Prometheus provider names
// them (k8s.io/component-base/metrics/prometheus/clientgo/leaderelection).
// Label name is the LeaderElectionConfig's Name. Process-wide; see the
// package documentation.
var (
	leaderMasterStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "Gauge of if the reporting system is master of the relevant lease, " +
			"0 indicates backup, 1 indicates master. 'name' is the string used to " +
			"identify the lease. Please make sure to group by name.",
	}, []string{"name"})

	leaderSlowpath = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leader_election_slowpath_total",
		Help: "Total number of slow path exercised in renewing leader leases. " +
			"'name' is the string used to identify the lease. Please make sure to group by name.",
	}, []string{"name"})

	leaderCollectors = []prometheus.Collector{leaderMasterStatus, leaderSlowpath}
)

// leaderProvider hands client-go the process-wide leader election series.
type leaderProvider struct{}

var _ leaderelection.MetricsProvider = leaderProvider{}

func (leaderProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric{} }

type leaderMetric struct{}

func (leaderMetric) On(
	name string,
) {
	leaderMasterStatus.WithLabelValues(name).Set(1)
}

func (leaderMetric) Off(
	name string,
) {
	leaderMasterStatus.WithLabelValues(name).Set(0)
}
func (leaderMetric) SlowpathExercised(name string) { leaderSlowpath.WithLabelValues(name).Inc() }

// LeaderStatus sets leader_election_master_status{name=lease}. client-go
// sets it to 1 on acquiring and to 0 when a renewal fails, but leaves it at
// 1 when Run returns because its context was cancelled (even with
// ReleaseOnCancel), since it expects the process to exit then. A host that
// keeps running after a term calls LeaderStatus(lease, false) once
// LeaderElector.Run has returned.
func LeaderStatus(lease string, leading bool) {
	leaderMasterStatus.WithLabelValues(lease).Set(boolValue(leading))
}
