package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// find returns the series of family name in g whose labels are exactly
// labels, and the family's type; nil if there is none.
func find(
	t *testing.T,
	g prometheus.Gatherer,
	name string,
	labels map[string]string,
) (*dto.Metric, dto.MetricType) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if sameLabels(m.GetLabel(), labels) {
				return m, mf.GetType()
			}
		}
	}
	return nil, 0
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, lp := range got {
		if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
			return false
		}
	}
	return true
}

// value returns a counter's or gauge's value, or a histogram's sample
// count; 0 when the series does not exist.
func value(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	m, _ := find(t, g, name, labels)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	t.Fatalf("%s%v: unexpected metric type", name, labels)
	return 0
}
