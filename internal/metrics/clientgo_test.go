package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlhost/ctrlhost/internal/metrics"
)

// newClientGoRegistry installs the providers and returns a fresh registry
// exposing the client-go series.
func newClientGoRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	metrics.InstallClientGoProviders()
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterClientGo(reg); err != nil {
		t.Fatalf("RegisterClientGo: %v", err)
	}
	return reg
}

func TestWorkqueueMetrics(t *testing.T) {
	reg := newClientGoRegistry(t)
	foo := map[string]string{"name": "foo"}
	// Deltas, so that -count=N works with the process-wide series.
	before := map[string]float64{}
	for _, n := range []string{"workqueue_adds_total", "workqueue_depth", "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds", "workqueue_retries_total"} {
		before[n] = value(t, reg, n, foo)
	}

	// An hour-long backoff keeps the rate-limited item out of the queue, so
	// the counts below do not depend on timing.
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "foo"})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	item, _ := q.Get()
	q.Done(item)
	q.AddRateLimited("c")

	tests := []struct {
		name  string
		typ   dto.MetricType
		value float64 // increase of the value or histogram count; -1: any
	}{
		{"workqueue_adds_total", dto.MetricType_COUNTER, 2},
		{"workqueue_depth", dto.MetricType_GAUGE, 1},
		{"workqueue_queue_duration_seconds", dto.MetricType_HISTOGRAM, 1},
		{"workqueue_work_duration_seconds", dto.MetricType_HISTOGRAM, 1},
		{"workqueue_retries_total", dto.MetricType_COUNTER, 1},
		{"workqueue_unfinished_work_seconds", dto.MetricType_GAUGE, -1},
		{"workqueue_longest_running_processor_seconds", dto.MetricType_GAUGE, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, typ := find(t, reg, tt.name, foo)
			if m == nil {
				t.Fatalf("no series %s{name=\"foo\"}", tt.name)
			}
			if typ != tt.typ {
				t.Errorf("type = %v, want %v", typ, tt.typ)
			}
			if tt.value >= 0 {
				if got := value(t, reg, tt.name, foo) - before[tt.name]; got != tt.value {
					t.Errorf("value = %v, want %v", got, tt.value)
				}
			}
			if h := m.GetHistogram(); h != nil {
				b := h.GetBucket()
				if len(b) != 10 || b[0].GetUpperBound() != 1e-8 || b[9].GetUpperBound() != 10 {
					t.Errorf("buckets: got %d from %v to %v, want 10 from 1e-8 to 10",
						len(b), b[0].GetUpperBound(), b[len(b)-1].GetUpperBound())
				}
			}
		})
	}
}

func TestWorkqueueProviderPerQueue(t *testing.T) {
	reg := newClientGoRegistry(t)
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Name:            "explicit",
		MetricsProvider: metrics.WorkqueueProvider(),
	})
	defer q.ShutDown()
	explicit := map[string]string{"name": "explicit"}
	before := value(t, reg, "workqueue_adds_total", explicit)
	q.Add("a")
	if got := value(t, reg, "workqueue_adds_total", explicit) - before; got != 1 {
		t.Errorf("workqueue_adds_total{name=explicit} grew by %v, want 1", got)
	}
}

// podServer answers every request with the given status and a small body,
// without a network.
type podServer struct{ status int }

func (s podServer) RoundTrip(req *http.Request) (*http.Response, error) {
	body := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","namespace":"default"}}`
	if s.status != http.StatusOK {
		body = `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`
	}
	return &http.Response{
		StatusCode: s.status,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    req,
	}, nil
}

func TestRESTClientMetrics(t *testing.T) {
	reg := newClientGoRegistry(t)
	const host = "api.example.invalid:6443"

	tests := []struct {
		name   string
		status int
		code   string
	}{
		{"ok", http.StatusOK, "200"},
		{"not found", http.StatusNotFound, "404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := kubernetes.NewForConfig(
				&rest.Config{Host: "https://" + host, Transport: podServer{tt.status}},
			)
			if err != nil {
				t.Fatal(err)
			}
			series := []struct {
				name   string
				labels map[string]string
			}{
				{
					"rest_client_requests_total",
					map[string]string{"code": tt.code, "method": "GET", "host": host},
				},
				{
					"rest_client_request_duration_seconds",
					map[string]string{"verb": "GET", "host": host},
				},
				{
					"rest_client_rate_limiter_duration_seconds",
					map[string]string{"verb": "GET", "host": host},
				},
				{"rest_client_response_size_bytes", map[string]string{"verb": "GET", "host": host}},
			}
			before := make([]float64, len(series))
			for i, s := range series {
				before[i] = value(t, reg, s.name, s.labels)
			}

			_, err = cs.CoreV1().Pods("default").Get(context.Background(), "x", metav1.GetOptions{})
			if (err == nil) != (tt.status == http.StatusOK) {
				t.Fatalf("Get: err = %v with status %d", err, tt.status)
			}

			for i, s := range series {
				if got := value(t, reg, s.name, s.labels) - before[i]; got != 1 {
					t.Errorf("%s%v grew by %v, want 1", s.name, s.labels, got)
				}
			}
		})
	}
}

func TestLeaderElectionMetrics(t *testing.T) {
	reg := newClientGoRegistry(t)
	const lease = "metrics-test"
	labels := map[string]string{"name": lease}

	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: lease},
		Client:     fake.NewClientset().CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "me"},
	}
	leading := make(chan struct{})
	stoppedCallback := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            lease,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer close(stoppedCallback)
				close(leading)
				<-ctx.Done()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m, typ := find(t, reg, "leader_election_master_status", labels); m == nil ||
		typ != dto.MetricType_GAUGE ||
		m.GetGauge().GetValue() != 0 {
		t.Fatalf(
			"before Run: leader_election_master_status{name=%q} = %v (type %v), want gauge 0",
			lease,
			m,
			typ,
		)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		le.Run(ctx)
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("did not become leader")
	}
	if got := value(t, reg, "leader_election_master_status", labels); got != 1 {
		t.Errorf("while leading: leader_election_master_status = %v, want 1", got)
	}
	cancel()
	<-ran
	<-stoppedCallback
	// client-go leaves the gauge at 1 when Run ends by cancellation; the
	// host resets it.
	t.Logf(
		"after Run: leader_election_master_status = %v",
		value(t, reg, "leader_election_master_status", labels),
	)
	metrics.LeaderStatus(lease, false)
	if got := value(t, reg, "leader_election_master_status", labels); got != 0 {
		t.Errorf("after LeaderStatus(false): leader_election_master_status = %v, want 0", got)
	}
}

func TestRegisterClientGoTwoRegistries(t *testing.T) {
	metrics.InstallClientGoProviders()
	reg1, reg2 := metrics.NewRegistry(), prometheus.NewRegistry()
	for i, reg := range []prometheus.Registerer{reg1, reg2, reg1} {
		if err := metrics.RegisterClientGo(reg); err != nil {
			t.Fatalf("RegisterClientGo #%d: %v", i, err)
		}
	}
	ctrl := metrics.NewControllers("two-registries")
	for i, reg := range []prometheus.Registerer{reg1, reg2, reg2} {
		if err := ctrl.Register(reg); err != nil {
			t.Fatalf("Controllers.Register #%d: %v", i, err)
		}
	}

	bar := map[string]string{"name": "bar"}
	before := value(t, reg1, "workqueue_adds_total", bar)
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "bar"})
	defer q.ShutDown()
	q.Add("a")
	ctrl.Started("c")

	for i, g := range []prometheus.Gatherer{reg1, reg2} {
		if got := value(t, g, "workqueue_adds_total", bar) - before; got != 1 {
			t.Errorf("registry %d: workqueue_adds_total{name=bar} grew by %v, want 1", i+1, got)
		}
		if got := value(t, g, "two_registries_controller_started_total", map[string]string{"controller": "c"}); got != 1 {
			t.Errorf(
				"registry %d: two_registries_controller_started_total{controller=c} = %v, want 1",
				i+1,
				got,
			)
		}
	}

	// A different collector under the same names is refused, by name.
	err := metrics.NewControllers("two-registries").Register(reg1)
	var are prometheus.AlreadyRegisteredError
	if err == nil || !errors.As(err, &are) ||
		!strings.Contains(err.Error(), "two_registries_controller_started_total") {
		t.Errorf(
			"second Controllers with the same namespace: err = %v, want AlreadyRegisteredError naming the metric",
			err,
		)
	}
	if err := metrics.RegisterClientGo(nil); err == nil {
		t.Error("RegisterClientGo(nil): want an error")
	}
}
