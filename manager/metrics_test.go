package manager_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/healthz"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestMetricsAfterAControllerRan: /metrics shows the workqueue metrics of a
// controller's queue (named after it), the per-controller metrics under the
// component's namespace, informer sync, and the Go collectors.
func TestMetricsAfterAControllerRan(t *testing.T) {
	processed := make(chan struct{})
	h := managertest.New(t, "metrics-manager", []descriptor.Descriptor{
		descriptor.New("queue-controller", func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
				workqueue.TypedRateLimitingQueueConfig[string]{Name: cc.Name})
			q.Add("some-key")
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				defer q.ShutDown()
				key, _ := q.Get()
				q.Forget(key)
				q.Done(key)
				close(processed)
				<-ctx.Done()
				return nil
			}), nil
		}),
	}).Start()
	h.WaitRunning("queue-controller")
	recv(t, "the key processed", processed)
	h.WaitHealthy("/readyz") // also records informer sync and health gauges
	h.WaitHealthy("/healthz")
	code, body := h.Get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	for _, want := range []string{
		// client-go's workqueue hooks are process-wide, so these counters
		// also hold earlier runs of this test (-count): check the series.
		`workqueue_adds_total{name="queue-controller"} `,
		`workqueue_depth{name="queue-controller"}`,
		`workqueue_queue_duration_seconds_bucket{name="queue-controller"`,
		`workqueue_work_duration_seconds_count{name="queue-controller"} `,
		`workqueue_retries_total{name="queue-controller"}`,
		`metrics_manager_controller_started_total{controller="queue-controller"} 1`,
		`metrics_manager_controller_running{controller="queue-controller"} 1`,
		`metrics_manager_controller_health_check{controller="queue-controller"} 1`,
		`metrics_manager_informers_synced{term="main"} 1`,
		`go_goroutines`,
		`process_`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// noted passes its health check with information.
type noted struct{}

func (noted) Run(ctx context.Context) error   { <-ctx.Done(); return nil }
func (noted) HealthCheck(*http.Request) error { return healthz.Note("3 widgets pending") }

var _ descriptor.HealthChecker = noted{}

// A HealthChecker that returns a Note passes: /readyz?verbose shows it as
// ok, and the health gauge is 1, not 0.
func TestHealthGaugeCountsANoteAsPassing(t *testing.T) {
	h := managertest.New(t, "note-manager", []descriptor.Descriptor{
		descriptor.New("noted-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) { return noted{}, nil }),
	}).Start()
	h.WaitRunning("noted-controller")
	h.WaitHealthy("/healthz")
	if _, body := h.Get("/healthz?verbose"); !strings.Contains(body, "[+]noted-controller ok: 3 widgets pending") {
		t.Errorf("/healthz?verbose:\n%s", body)
	}
	if _, body := h.Get("/metrics"); !strings.Contains(body, `note_manager_controller_health_check{controller="noted-controller"} 1`) {
		t.Errorf("/metrics: health gauge of a noted controller is not 1:\n%s", body)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// sided has a readiness-only and a liveness-only check.
type sided struct{ ready, live error }

func (sided) Run(ctx context.Context) error        { <-ctx.Done(); return nil }
func (s sided) ReadinessCheck(*http.Request) error { return s.ready }
func (s sided) LivenessCheck(*http.Request) error  { return s.live }

// A readiness-only check fails /readyz only; a liveness-only one fails
// /healthz and /livez only.
func TestReadinessAndLivenessOnlyChecks(t *testing.T) {
	h := managertest.New(t, "sided-manager", []descriptor.Descriptor{
		descriptor.New("not-ready-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return sided{ready: errors.New("catching up")}, nil
		}),
		descriptor.New("wedged-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return sided{live: errors.New("worker wedged")}, nil
		}),
	}).Start()
	h.WaitRunning("not-ready-controller", "wedged-controller")
	for _, tc := range []struct {
		path    string
		failing string
		passing string
	}{
		{"/readyz/not-ready-controller", "catching up", ""},
		{"/healthz/not-ready-controller", "", "ok"},
		{"/livez/not-ready-controller", "", "ok"},
		{"/readyz/wedged-controller", "", "ok"},
		{"/healthz/wedged-controller", "worker wedged", ""},
		{"/livez/wedged-controller", "worker wedged", ""},
	} {
		code, body := h.Get(tc.path + "?verbose")
		switch {
		case tc.failing != "" && (code != http.StatusInternalServerError || !strings.Contains(body, tc.failing)):
			t.Errorf("%s = %d %q, want 500 with %q", tc.path, code, body, tc.failing)
		case tc.passing != "" && code != http.StatusOK:
			t.Errorf("%s = %d %q, want 200", tc.path, code, body)
		}
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsGathererServedBesideTheRegistry: a source added with
// WithMetricsGatherer (upstream controllers' legacyregistry, say) is served
// on /metrics together with the Manager's own registry.
func TestMetricsGathererServedBesideTheRegistry(t *testing.T) {
	extra := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "upstream_side_total", Help: "From another registry."})
	extra.MustRegister(c)
	c.Add(7)
	h := managertest.New(t, "gatherer-manager", []descriptor.Descriptor{
		descriptor.New("idle-controller", func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
		}),
	})
	h.Builder.WithMetricsGatherer(extra)
	h.Start()
	h.WaitRunning("idle-controller")
	code, body := h.Get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	for _, want := range []string{"upstream_side_total 7", `gatherer_manager_controller_running{controller="idle-controller"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
