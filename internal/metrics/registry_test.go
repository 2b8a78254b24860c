package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ctrlhost/ctrlhost/internal/metrics"
)

func TestNamespace(t *testing.T) {
	tests := []struct{ in, want string }{
		{"kube-controller-manager", "kube_controller_manager"},
		{"my.ctrl-host", "my_ctrl_host"},
		{"ctrlhost", "ctrlhost"},
		{"3scale", "_3scale"},
		{"a:b", "a_b"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := metrics.Namespace(tt.in); got != tt.want {
				t.Errorf("Namespace(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNewRegistry(t *testing.T) {
	reg := metrics.NewRegistry()
	if m, _ := find(t, reg, "go_goroutines", map[string]string{}); m == nil {
		t.Error("NewRegistry does not gather go_goroutines")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if n := mf.GetName(); !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
			t.Errorf("NewRegistry gathers %s; want only go_* and process_*", n)
		}
	}
}

// ignoreErrors gathers what it can.
type ignoreErrors struct{ prometheus.Gatherer }

func (g ignoreErrors) Gather() ([]*dto.MetricFamily, error) {
	mfs, _ := g.Gatherer.Gather()
	return mfs, nil
}

// failing is a collector whose Collect always fails.
type failing struct{ desc *prometheus.Desc }

func (f failing) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("broken"))
}

func TestHandler(t *testing.T) {
	reg := metrics.NewRegistry()
	c := metrics.NewControllers("handler-test")
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	c.Started("a")
	reg.MustRegister(failing{prometheus.NewDesc("broken_metric", "Always fails.", nil, nil)})

	h := metrics.Handler(reg)
	for i := range 2 { // a second scrape works too
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != http.StatusOK {
			t.Fatalf("scrape %d: status %d, body %s", i, rec.Code, body)
		}
		for _, want := range []string{
			`handler_test_controller_started_total{controller="a"} 1`,
			"go_goroutines",
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("scrape %d: body lacks %q", i, want)
			}
		}
	}
	if got := value(t, ignoreErrors{reg}, "promhttp_metric_handler_errors_total", map[string]string{"cause": "gathering"}); got != 2 {
		t.Errorf("promhttp_metric_handler_errors_total{cause=gathering} = %v, want 2", got)
	}
	// A second handler on the same registry shares the error counter.
	_ = metrics.Handler(reg)
}
