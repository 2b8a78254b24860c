package pcrcleaner_test

import (
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/pcrcleaner"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := pcrcleaner.Descriptor(pcrcleaner.NewOptions())
	controllertest.CheckIdentity(t, d,
		controllertest.Identity{Name: "podcertificaterequest-cleaner-controller"})
	// The gate is read by the InitFunc, with its default for a host that
	// does not know it; a descriptor gate would fail such a host's Build.
	if len(d.FeatureGates()) != 0 {
		t.Errorf("descriptor gates %v", d.FeatureGates())
	}
	if got := d.Informers(); len(got) != 1 || got[0] != certv1.SchemeGroupVersion.WithResource(
		"podcertificaterequests") {
		t.Errorf("informers %v, want v1 podcertificaterequests", got)
	}
	o := pcrcleaner.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
}

func TestFeatureSpecs(t *testing.T) {
	specs := pcrcleaner.FeatureSpecs()
	s, ok := specs[pcrcleaner.FeaturePodCertificateRequest]
	if len(specs) != 1 || !ok || !s.Default || s.PreRelease != featuregate.GA || s.LockToDefault {
		t.Errorf("FeatureSpecs() = %+v, want PodCertificateRequest, GA, on, not locked (1.37)",
			specs)
	}
	if err := featuregate.NewFeatureGate().Add(specs); err != nil {
		t.Error(err)
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, pcrcleaner.Descriptor(pcrcleaner.NewOptions()))
}

func TestNotStartedWithTheGateOff(t *testing.T) {
	off := featuregate.NewFeatureGate()
	if err := off.Add(pcrcleaner.FeatureSpecs()); err != nil {
		t.Fatal(err)
	}
	if err := off.Set("PodCertificateRequest=false"); err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	c, err := pcrcleaner.Descriptor(pcrcleaner.NewOptions()).Init()(t.Context(),
		descriptor.Context{Name: pcrcleaner.Name, FeatureGate: off,
			ClientBuilder:   controllertest.ClientBuilder(cs, nil),
			InformerFactory: informers.NewSharedInformerFactory(cs, 0)})
	if c != nil || err != nil {
		t.Errorf("Init = %v, %v; want not started", c, err)
	}
}

// TestManagerDeletesOldRequests: under a Manager, the first pass deletes
// a request created more than fifteen minutes ago and keeps a newer one.
func TestManagerDeletesOldRequests(t *testing.T) {
	created := func(name string, ago time.Duration) *certv1.PodCertificateRequest {
		return &certv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
			Name: name, UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(time.Now().Add(-ago))}}
	}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{pcrcleaner.Descriptor(pcrcleaner.NewOptions())},
		created("old", 16*time.Minute), created("new", time.Minute)).Start()
	gone := func(name string) bool {
		_, err := h.Client.CertificatesV1().PodCertificateRequests("ns").Get(t.Context(), name,
			metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	controllertest.WaitFor(t, "the old request deleted", func() bool { return gone("old") })
	if gone("new") {
		t.Error("the new request was deleted")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
