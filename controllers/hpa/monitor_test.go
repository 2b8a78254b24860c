package hpa

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value reads a counter's or a gauge's value.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

func TestMonitor(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMonitor(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, cpuHPA(50, 10), 2, twoPods()...)
	f.c.monitor = m
	other := cpuHPA(50, 10)
	other.Name = "other"
	f.c.added(other, false)
	f.c.added(other, false) // registered already: not counted again
	f.metrics.cpu = map[string]int64{"a": 150, "b": 150}
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.metrics.cpu = nil
	if _, err := f.sync(); err == nil {
		t.Fatal("a sync without metrics succeeded")
	}
	for _, c := range []struct {
		what string
		m    prometheus.Metric
		want float64
	}{
		{"num_horizontal_pod_autoscalers", m.hpas, 1},
		{"desired_replicas{default,web}", m.desired.WithLabelValues("default", "web"), 4},
		{"reconciliations_total{scale_up,none}",
			m.reconciliations.WithLabelValues("scale_up", "none"), 1},
		{"reconciliations_total{none,internal}",
			m.reconciliations.WithLabelValues("none", "internal"), 1},
		{"metric_computation_total{scale_up,none,Resource}",
			m.computations.WithLabelValues("scale_up", "none", "Resource"), 1},
		{"metric_computation_total{none,internal,Resource}",
			m.computations.WithLabelValues("none", "internal", "Resource"), 1},
	} {
		if got := value(t, c.m); got != c.want {
			t.Errorf("%s = %v, want %v", c.what, got, c.want)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 6 {
		t.Errorf("%d metric families registered, want KCM's 6 (stale skips aside)",
			len(families))
	}
	// A next term registers on the same registry and starts its gauges at 0.
	again, err := newMonitor(reg)
	if err != nil {
		t.Fatal(err)
	}
	if again.reconciliations != m.reconciliations || value(t, again.hpas) != 0 {
		t.Error("a second term did not take over the registered metrics with reset gauges")
	}
}
