package endpointslicemirroring_test

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/endpointslicemirroring"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	d := endpointslicemirroring.Descriptor(endpointslicemirroring.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name: "endpointslice-mirroring-controller", Alias: "endpointslicemirroring",
		EventSource: "endpoint-slice-mirroring-controller",
	})
	var informers []string
	for _, gvr := range d.Informers() {
		informers = append(informers, gvr.Resource)
	}
	slices.Sort(informers)
	if want := []string{"endpoints", "endpointslices", "services"}; !slices.Equal(informers,
		want) {
		t.Errorf("informers %q, want %q", informers, want)
	}
	if r := d.Reads()[corev1.SchemeGroupVersion.WithResource("services")]; !slices.Equal(r,
		[]string{"spec.selector"}) {
		t.Errorf("reads of services %q, want spec.selector", r)
	}
	tests := []struct {
		flag, arg, def string
		check          func(endpointslicemirroring.Options) bool
	}{
		{"mirroring-concurrent-service-endpoint-syncs",
			"--mirroring-concurrent-service-endpoint-syncs=9", "5",
			func(o endpointslicemirroring.Options) bool {
				return o.ConcurrentServiceEndpointSyncs == 9
			}},
		{"mirroring-max-endpoints-per-subset", "--mirroring-max-endpoints-per-subset=7", "1000",
			func(o endpointslicemirroring.Options) bool { return o.MaxEndpointsPerSubset == 7 }},
		{"mirroring-endpointslice-updates-batch-period",
			"--mirroring-endpointslice-updates-batch-period=2s", "0s",
			func(o endpointslicemirroring.Options) bool {
				return o.EndpointUpdatesBatchPeriod == 2*time.Second
			}},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			o := endpointslicemirroring.NewOptions()
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
	const prefix = `descriptor "endpointslice-mirroring-controller": `
	type opts = endpointslicemirroring.Options
	tests := []struct {
		name    string
		o       opts
		wantErr []string
	}{
		{"defaults", endpointslicemirroring.NewOptions(), nil},
		{"zero value is rejected, as KCM rejects 0", opts{}, []string{
			"--mirroring-concurrent-service-endpoint-syncs: must be between 1 and 50, got 0",
			"--mirroring-max-endpoints-per-subset: must be between 1 and 1000, got 0"}},
		{"too many workers", opts{ConcurrentServiceEndpointSyncs: 51, MaxEndpointsPerSubset: 1},
			[]string{prefix +
				"--mirroring-concurrent-service-endpoint-syncs: must be between 1 and 50, got 51"}},
		{"too many per subset",
			opts{ConcurrentServiceEndpointSyncs: 1, MaxEndpointsPerSubset: 1001},
			[]string{"--mirroring-max-endpoints-per-subset: must be between 1 and 1000, got 1001"}},
		{"negative batch period", opts{ConcurrentServiceEndpointSyncs: 1, MaxEndpointsPerSubset: 1,
			EndpointUpdatesBatchPeriod: -time.Second},
			[]string{"--mirroring-endpointslice-updates-batch-period: " +
				"must not be negative, got -1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, endpointslicemirroring.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue even when
// the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		endpointslicemirroring.Descriptor(endpointslicemirroring.NewOptions()))
}

// TestManagerMirrorsEndpoints: in a Manager, a selectorless Service's
// Endpoints is mirrored; a slice deleted by someone else comes back; the
// skip-mirror label removes the slices, and so does, once it is gone, the
// Service gaining a selector.
func TestManagerMirrorsEndpoints(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}, {IP: "2001:db8::1"}},
			Ports:     []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}},
		}}}
	h := managertest.NewAPI(t, "test", []descriptor.Descriptor{
		endpointslicemirroring.Descriptor(endpointslicemirroring.NewOptions())})
	for _, r := range []struct{ resource, kind string }{
		{"endpoints", "Endpoints"}, {"endpointslices", "EndpointSlice"}} {
		gv := corev1.SchemeGroupVersion
		if r.kind == "EndpointSlice" {
			gv = discoveryv1.SchemeGroupVersion
		}
		h.API.Serve(gv.WithResource(r.resource), r.kind, managertest.WithoutStatus())
	}
	if err := h.API.Create(svc); err != nil {
		t.Fatal(err)
	}
	if err := h.API.Create(ep); err != nil {
		t.Fatal(err)
	}
	client := h.API.Kube()
	h.Start()
	list := func() []discoveryv1.EndpointSlice {
		l, err := client.DiscoveryV1().EndpointSlices("ns").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	controllertest.WaitFor(t, "an IPv4 and an IPv6 slice", func() bool {
		l := list()
		return len(l) == 2 && l[0].AddressType != l[1].AddressType
	})
	gone := list()[0].Name
	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(t.Context(), gone,
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the deleted slice replaced", func() bool {
		l := list()
		return len(l) == 2 && l[0].Name != gone && l[1].Name != gone
	})
	stored, err := client.CoreV1().Endpoints("ns").Get(t.Context(), "ext", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored.Labels = map[string]string{discoveryv1.LabelSkipMirror: "true"}
	if _, err := client.CoreV1().Endpoints("ns").Update(t.Context(), stored,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "no slice once skip-mirror is set", func() bool {
		return len(list()) == 0
	})
	if stored, err = client.CoreV1().Endpoints("ns").Get(t.Context(), "ext",
		metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	stored.Labels = nil
	if _, err := client.CoreV1().Endpoints("ns").Update(t.Context(), stored,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "mirrored again without skip-mirror", func() bool {
		return len(list()) == 2
	})
	s, err := client.CoreV1().Services("ns").Get(t.Context(), "ext", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Selector = map[string]string{"app": "ext"}
	if _, err := client.CoreV1().Services("ns").Update(t.Context(), s,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "no slice once the Service has a selector", func() bool {
		return len(list()) == 0
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
