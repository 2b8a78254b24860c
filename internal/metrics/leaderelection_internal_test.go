package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Slow-path renewals are hard to provoke through a real elector, so call
// the provider client-go would call.
func TestLeaderMetricSlowpath(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterClientGo(reg); err != nil {
		t.Fatal(err)
	}
	read := func(c prometheus.Collector) float64 {
		t.Helper()
		var m dto.Metric
		if err := c.(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		if m.Counter != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}

	before := read(leaderSlowpath.WithLabelValues("slow")) // for -count=N
	m := leaderProvider{}.NewLeaderMetric()
	m.On("slow")
	m.SlowpathExercised("slow")
	m.SlowpathExercised("slow")
	if got := read(leaderSlowpath.WithLabelValues("slow")) - before; got != 2 {
		t.Errorf("leader_election_slowpath_total{name=slow} grew by %v, want 2", got)
	}
	if got := read(leaderMasterStatus.WithLabelValues("slow")); got != 1 {
		t.Errorf("leader_election_master_status{name=slow} = %v, want 1", got)
	}
	m.Off("slow")
	if got := read(leaderMasterStatus.WithLabelValues("slow")); got != 0 {
		t.Errorf("after Off: leader_election_master_status{name=slow} = %v, want 0", got)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "leader_election_slowpath_total"
	}
	if !found {
		t.Error("registry does not gather leader_election_slowpath_total")
	}
}
