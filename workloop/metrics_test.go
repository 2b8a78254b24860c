package workloop

import (
	"context"
	"errors"
	"maps"
	"strings"
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
	processCounters.panics.WithLabelValues("registered").Add(0)
	processCounters.staleSkips.WithLabelValues("registered").Add(0)
	processCounters.staleExpired.WithLabelValues("registered").Add(0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"workloop_sync_panics_total":          false,
		"workloop_stale_syncs_skipped_total":  false,
		"workloop_stale_writes_expired_total": false,
	}
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

// Loops on two registries (two Managers in one process) count apart; two
// loops on one registry share its counters, each with its own series.
func TestCountersArePerRegistry(t *testing.T) {
	panicky := func(context.Context, string) error { panic("boom") }
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a1 := New("a1", panicky, Options{Metrics: regA})
	a2 := New("a2", panicky, Options{Metrics: regA})
	b := New("b", panicky, Options{Metrics: regB})
	for _, l := range []*Loop{a1, a2, b} {
		l.Add("k")
		if err := l.safeSync(context.Background(), "k"); !errors.Is(err, errPanicked) {
			t.Fatalf("%s: safeSync = %v, want a recovered panic", l.Name(), err)
		}
		l.ShutDown()
	}
	if a1.counters.panics != a2.counters.panics {
		t.Error("two loops on one registry registered two counters")
	}
	for _, tc := range []struct {
		reg  *prometheus.Registry
		want map[string]float64
	}{
		{regA, map[string]float64{"a1": 1, "a2": 1}},
		{regB, map[string]float64{"b": 1}},
	} {
		if got := gatheredPanics(t, tc.reg); !maps.Equal(got, tc.want) {
			t.Errorf("panics gathered = %v, want %v", got, tc.want)
		}
	}
	if got := counterValue(t, processCounters.panics, "a1"); got != 0 {
		t.Errorf("process-wide counter for a1 = %v, want 0: the loop counts on its registry", got)
	}
}

// A registry holding something else under the kit's names: Run says so.
func TestMetricsConflictIsRunsError(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "workloop_sync_panics_total", Help: "not a counter vec"}))
	l := New("clash", func(context.Context, string) error { return nil }, Options{Metrics: reg})
	err := l.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "clash: Options.Metrics") {
		t.Errorf("Run = %v, want the registration error naming the loop and Options.Metrics", err)
	}
}

// gatheredPanics returns workloop_sync_panics_total by controller.
func gatheredPanics(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "workloop_sync_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
