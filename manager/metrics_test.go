package manager_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlhost/ctrlhost/descriptor"
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
