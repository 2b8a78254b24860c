package endpoints_test

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller maintains (as KCM's)

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ctrlhost/ctrlhost/controllers/endpoints"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		endpoints.Descriptor(endpoints.NewOptions()),
		controllertest.Identity{
			Name: "endpoints-controller", Alias: "endpoint", EventSource: "endpoint-controller",
		},
	)
	o := endpoints.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"concurrent-endpoint-syncs",
		"--concurrent-endpoint-syncs=9",
	)
	if f.DefValue != "5" || f.Usage == "" {
		t.Errorf("default %q usage %q", f.DefValue, f.Usage)
	}
	if o.ConcurrentEndpointSyncs != 9 {
		t.Errorf("ConcurrentEndpointSyncs %d, want 9", o.ConcurrentEndpointSyncs)
	}
	o = endpoints.NewOptions()
	f = controllertest.ParseFlag(
		t,
		o.AddFlags,
		"endpoint-updates-batch-period",
		"--endpoint-updates-batch-period=3s",
	)
	if f.DefValue != "0s" {
		t.Errorf("default %q", f.DefValue)
	}
	if o.EndpointUpdatesBatchPeriod != 3*time.Second {
		t.Errorf("EndpointUpdatesBatchPeriod %v, want 3s", o.EndpointUpdatesBatchPeriod)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       endpoints.Options
		wantErr []string
	}{
		{"defaults", endpoints.NewOptions(), nil},
		{"zero value takes the default", endpoints.Options{}, nil},
		{"negative workers", endpoints.Options{ConcurrentEndpointSyncs: -1},
			[]string{
				`descriptor "endpoints-controller": --concurrent-endpoint-syncs: must be at least 1, got -1`,
			}},
		{"negative batch period", endpoints.Options{EndpointUpdatesBatchPeriod: -time.Second},
			[]string{"--endpoint-updates-batch-period: must not be negative, got -1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, endpoints.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

// TestManagerWritesAndCleansEndpoints: in a Manager, the controller writes
// a Service's Endpoints, deletes a leftover Endpoints object whose Service
// is gone (found at start), keeps leader-election locks, and deletes a
// Service's Endpoints when the Service goes.
func TestManagerWritesAndCleansEndpoints(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.1",
			Ports: []corev1.ServicePort{
				{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
			}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
			Name:      "a",
			Labels:    map[string]string{"app": "web"},
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  "10.0.0.1",
			PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
		},
	}
	leftover := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}
	lock := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "lock",
		Annotations: map[string]string{"control-plane.alpha.kubernetes.io/leader": "{}"}}}
	h := managertest.New(t, "test", []descriptor.Descriptor{endpoints.Descriptor(endpoints.NewOptions())},
		svc, pod, leftover, lock).
		Start()
	get := func(ns, name string) (*corev1.Endpoints, error) {
		return h.Client.CoreV1().Endpoints(ns).Get(t.Context(), name, metav1.GetOptions{})
	}
	controllertest.WaitFor(t, "the Service's Endpoints", func() bool {
		ep, err := get("ns", "web")
		return err == nil && len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 1
	})
	controllertest.WaitFor(t, "the leftover Endpoints to be deleted", func() bool {
		_, err := get("ns", "gone")
		return apierrors.IsNotFound(err)
	})
	if err := h.Client.CoreV1().Services("ns").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the deleted Service's Endpoints to go", func() bool {
		_, err := get("ns", "web")
		return apierrors.IsNotFound(err)
	})
	if _, err := get("kube-system", "lock"); err != nil {
		t.Errorf("leader-election lock: %v", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, endpoints.Descriptor(endpoints.NewOptions()))
}
