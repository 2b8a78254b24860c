package endpointslice_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/endpointslice"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		endpointslice.Descriptor(endpointslice.NewOptions()),
		controllertest.Identity{
			Name: "endpointslice-controller", Alias: "endpointslice", EventSource: "endpoint-slice-controller",
		},
	)
	tests := []struct {
		flag, arg, def string
		check          func(endpointslice.Options) bool
	}{
		{"concurrent-service-endpoint-syncs", "--concurrent-service-endpoint-syncs=9", "5",
			func(o endpointslice.Options) bool { return o.ConcurrentServiceEndpointSyncs == 9 }},
		{"max-endpoints-per-slice", "--max-endpoints-per-slice=7", "100",
			func(o endpointslice.Options) bool { return o.MaxEndpointsPerSlice == 7 }},
		{"endpointslice-updates-batch-period", "--endpointslice-updates-batch-period=2s", "0s",
			func(o endpointslice.Options) bool { return o.EndpointUpdatesBatchPeriod == 2*time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			o := endpointslice.NewOptions()
			f := controllertest.ParseFlag(t, o.AddFlags, tt.flag, tt.arg)
			if f.DefValue != tt.def || f.Usage == "" {
				t.Errorf("default %q (want %q), usage %q", f.DefValue, tt.def, f.Usage)
			}
			if !tt.check(o) {
				t.Errorf("%s did not set the option: %+v", tt.arg, o)
			}
		})
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	const prefix = `descriptor "endpointslice-controller": `
	tests := []struct {
		name    string
		o       endpointslice.Options
		wantErr []string
	}{
		{"defaults", endpointslice.NewOptions(), nil},
		{"zero value is rejected, as KCM rejects 0", endpointslice.Options{}, []string{
			"--concurrent-service-endpoint-syncs: must be between 1 and 50, got 0",
			"--max-endpoints-per-slice: must be between 1 and 1000, got 0"}},
		{"too many workers", endpointslice.Options{ConcurrentServiceEndpointSyncs: 51},
			[]string{
				prefix + "--concurrent-service-endpoint-syncs: must be between 1 and 50, got 51",
			}},
		{"negative workers", endpointslice.Options{ConcurrentServiceEndpointSyncs: -1},
			[]string{"--concurrent-service-endpoint-syncs: must be between 1 and 50, got -1"}},
		{"slices too big", endpointslice.Options{MaxEndpointsPerSlice: 1001},
			[]string{"--max-endpoints-per-slice: must be between 1 and 1000, got 1001"}},
		{"negative batch period", endpointslice.Options{EndpointUpdatesBatchPeriod: -time.Second},
			[]string{"--endpointslice-updates-batch-period: must not be negative, got -1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, endpointslice.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestFeatureSpecs(t *testing.T) {
	spec, ok := endpointslice.FeatureSpecs()[endpointslice.FeaturePreferSameTrafficDistribution]
	if !ok || !spec.Default || spec.PreRelease != featuregate.GA || !spec.LockToDefault {
		t.Errorf(
			"PreferSameTrafficDistribution spec %+v, want GA, on and locked (Kubernetes 1.37)",
			spec,
		)
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(
		t,
		endpointslice.Descriptor(endpointslice.NewOptions()),
	)
}

// TestManagerWritesAndRepairsSlices: in a Manager, the controller writes a
// Service's slice, and recreates it when someone else deletes it.
func TestManagerWritesAndRepairsSlices(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.1",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
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
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  "10.0.0.1",
			PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
		},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	// An API server with resourceVersions: a fake clientset's watch can
	// miss the slice written between its informer's list and watch, and
	// then its deletion (a test that timed out about once in twenty runs).
	h := managertest.NewAPI(
		t,
		"test",
		[]descriptor.Descriptor{
			endpointslice.Descriptor(endpointslice.NewOptions()),
		},
		svc,
		pod,
		node,
	)
	h.API.Serve(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), "EndpointSlice",
		managertest.WithoutStatus())
	client := h.API.Kube()
	// Status is stored apart, as by the API server: set it as a kubelet does.
	stored, err := client.CoreV1().Pods("ns").Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored.Status = pod.Status
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(t.Context(), stored,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Start()
	list := func() []discoveryv1.EndpointSlice {
		l, err := client.DiscoveryV1().EndpointSlices("ns").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	controllertest.WaitFor(t, "the Service's slice", func() bool {
		l := list()
		return len(l) == 1 && len(l[0].Endpoints) == 1
	})
	first := list()[0].Name
	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(t.Context(), first,
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "a new slice in place of the deleted one", func() bool {
		l := list()
		return len(l) == 1 && l[0].Name != first && len(l[0].Endpoints) == 1
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
