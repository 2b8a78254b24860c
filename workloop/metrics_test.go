package workloop

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counterValue reads one series of a kit counter.
func counterValue(t *testing.T, vec *prometheus.CounterVec, controller string) float64 {
	t.Helper()
	var m dto.Metric
	if err := vec.WithLabelValues(controller).Write(&m); err != nil {
		t.Fatalf("reading counter: %v", err)
	}
	return m.GetCounter().GetValue()
}

func TestRegisterMetricsTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := RegisterMetrics(reg); err != nil {
			t.Fatalf("RegisterMetrics: %v", err)
		}
	}
	panicsTotal.WithLabelValues("registered").Add(0)
	staleSkipsTotal.WithLabelValues("registered").Add(0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"workloop_sync_panics_total": false, "workloop_stale_syncs_skipped_total": false}
	for _, mf := range mfs {
		if _, ok := want[mf.GetName()]; ok {
			want[mf.GetName()] = true
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("%s not gathered", name)
		}
	}
}
