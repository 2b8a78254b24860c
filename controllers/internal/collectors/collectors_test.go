package collectors

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func counter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
}

// A second term registers the same metric and counts on the first one's.
func TestASecondTermCountsOnTheFirstTermsCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	first, second := counter(), counter()
	r1, r2 := On(reg), On(reg)
	Register(r1, &first)
	Register(r2, &second)
	if err := firstErr(r1, r2); err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatal("the second term's collector is not the one registered")
	}
	second.Inc()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Errorf("gathered %v (%v), want x_total 1", mfs, err)
	}
}

func TestANilRegistryRegistersNothing(t *testing.T) {
	c := counter()
	orig := c
	r := On(nil)
	Register(r, &c)
	if c != orig || r.Err() != nil {
		t.Errorf("a nil registry changed the collector or failed: %v", r.Err())
	}
}

// A name registered otherwise (here with other labels) is a failure,
// kept for Err; the collector stays the caller's.
func TestAClashIsAnError(t *testing.T) {
	reg := prometheus.NewRegistry()
	other := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"},
		[]string{"code"})
	if err := reg.Register(other); err != nil {
		t.Fatal(err)
	}
	c := counter()
	orig := c
	r := On(reg)
	Register(r, &c)
	if c != orig {
		t.Error("the collector was replaced by one registered otherwise")
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "registering metrics") {
		t.Errorf("Err = %v, want the clash", err)
	}
}

func firstErr(rs ...*Registry) error {
	for _, r := range rs {
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}
