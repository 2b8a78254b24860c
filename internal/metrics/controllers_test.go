package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ctrlhost/ctrlhost/internal/metrics"
)

func TestControllers(t *testing.T) {
	type series struct {
		name   string
		labels map[string]string
		typ    dto.MetricType
		value  float64
	}
	ctl := func(n string) map[string]string { return map[string]string{"controller": n} }
	tests := []struct {
		name      string
		component string
		do        func(c *metrics.Controllers)
		want      []series
	}{
		{
			name:      "started and stopped",
			component: "kube-controller-manager",
			do: func(c *metrics.Controllers) {
				c.Started("deployment")
				c.Stopped("deployment")
				c.Started("deployment")
			},
			want: []series{
				{
					"kube_controller_manager_controller_started_total",
					ctl("deployment"),
					dto.MetricType_COUNTER,
					2,
				},
				{
					"kube_controller_manager_controller_running",
					ctl("deployment"),
					dto.MetricType_GAUGE,
					1,
				},
			},
		},
		{
			name:      "two runs at once (a sharded controller's slots)",
			component: "ns",
			do: func(c *metrics.Controllers) {
				c.Started("a")
				c.Started("a")
				c.Stopped("a")
			},
			want: []series{{"ns_controller_running", ctl("a"), dto.MetricType_GAUGE, 1}},
		},
		{
			name:      "slots held",
			component: "ns",
			do: func(c *metrics.Controllers) {
				c.SlotHeld("ns-shard", 3, true)
				c.SlotHeld("ns-shard", 4, true)
				c.SlotHeld("ns-shard", 4, false)
			},
			want: []series{
				{
					"ns_shard_slot_held",
					map[string]string{"group": "ns-shard", "slot": "3"},
					dto.MetricType_GAUGE,
					1,
				},
				{
					"ns_shard_slot_held",
					map[string]string{"group": "ns-shard", "slot": "4"},
					dto.MetricType_GAUGE,
					0,
				},
			},
		},
		{
			name:      "stopped",
			component: "ns",
			do: func(c *metrics.Controllers) {
				c.Started("a")
				c.Stopped("a")
			},
			want: []series{{"ns_controller_running", ctl("a"), dto.MetricType_GAUGE, 0}},
		},
		{
			name:      "panic and failure",
			component: "ns",
			do: func(c *metrics.Controllers) {
				c.Panicked("a")
				c.Failed("a")
				c.Failed("b")
			},
			want: []series{
				{"ns_controller_panics_total", ctl("a"), dto.MetricType_COUNTER, 1},
				{"ns_controller_failures_total", ctl("a"), dto.MetricType_COUNTER, 1},
				{"ns_controller_failures_total", ctl("b"), dto.MetricType_COUNTER, 1},
			},
		},
		{
			name:      "health",
			component: "ns",
			do: func(c *metrics.Controllers) {
				c.HealthCheck("ok", true)
				c.HealthCheck("bad", true)
				c.HealthCheck("bad", false)
			},
			want: []series{
				{"ns_controller_health_check", ctl("ok"), dto.MetricType_GAUGE, 1},
				{"ns_controller_health_check", ctl("bad"), dto.MetricType_GAUGE, 0},
			},
		},
		{
			name:      "informers synced",
			component: "ns",
			do: func(c *metrics.Controllers) {
				c.InformersSynced("main", true)
				c.InformersSynced("migration", false)
			},
			want: []series{
				{"ns_informers_synced", map[string]string{"term": "main"}, dto.MetricType_GAUGE, 1},
				{
					"ns_informers_synced",
					map[string]string{"term": "migration"},
					dto.MetricType_GAUGE,
					0,
				},
			},
		},
		{
			name:      "init creates zero series",
			component: "ns",
			do:        func(c *metrics.Controllers) { c.Init("x") },
			want: []series{
				{"ns_controller_started_total", ctl("x"), dto.MetricType_COUNTER, 0},
				{"ns_controller_running", ctl("x"), dto.MetricType_GAUGE, 0},
				{"ns_controller_panics_total", ctl("x"), dto.MetricType_COUNTER, 0},
				{"ns_controller_failures_total", ctl("x"), dto.MetricType_COUNTER, 0},
			},
		},
		{
			name:      "empty namespace",
			component: "",
			do:        func(c *metrics.Controllers) { c.Started("a") },
			want:      []series{{"controller_started_total", ctl("a"), dto.MetricType_COUNTER, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c := metrics.NewControllers(tt.component)
			if err := c.Register(reg); err != nil {
				t.Fatalf("Register: %v", err)
			}
			tt.do(c)
			for _, w := range tt.want {
				m, typ := find(t, reg, w.name, w.labels)
				if m == nil {
					t.Errorf("no series %s%v", w.name, w.labels)
					continue
				}
				if typ != w.typ {
					t.Errorf("%s: type %v, want %v", w.name, typ, w.typ)
				}
				if got := value(t, reg, w.name, w.labels); got != w.value {
					t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
				}
			}
		})
	}
}

func TestControllersNil(t *testing.T) {
	var c *metrics.Controllers
	c.Started("a")
	c.Stopped("a")
	c.Panicked("a")
	c.Failed("a")
	c.HealthCheck("a", true)
	c.InformersSynced("main", true)
	c.SlotHeld("g", 1, true)
	c.Init("a")
	if err := c.Register(prometheus.NewRegistry()); err != nil {
		t.Errorf("nil Register: %v", err)
	}
}

// A controller named by Init is scraped at zero before anything happened to
// it, so an alert on increase(..._panics_total) sees the first panic.
func TestControllersInitScrapedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := metrics.NewControllers("my-controller-manager")
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	c.Init("deployment", "podgc")
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, ctl := range []string{"deployment", "podgc"} {
		for _, name := range []string{"controller_panics_total", "controller_failures_total", "controller_started_total", "controller_running"} {
			line := fmt.Sprintf("my_controller_manager_%s{controller=%q} 0\n", name, ctl)
			if !strings.Contains(body, line) {
				t.Errorf("/metrics lacks %q", strings.TrimSpace(line))
			}
		}
	}
	if strings.Contains(body, "controller_health_check{") {
		t.Error("health gauge present before any check ran")
	}
}
