package servicecidr_test

import (
	"context"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/servicecidr"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := servicecidr.Descriptor(servicecidr.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{Name: "service-cidr-controller"})
	o := servicecidr.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	if _, sharded := d.IsSharded(); sharded {
		t.Error("sharded; a ServiceCIDR's fate depends on every other and every address")
	}
	spec, ok := servicecidr.FeatureSpecs()[servicecidr.FeatureMultiCIDRServiceAllocator]
	if !ok || !spec.Default || !spec.LockToDefault {
		t.Errorf("MultiCIDRServiceAllocator spec = %+v, want on and locked (GA in 1.37)", spec)
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		servicecidr.Descriptor(servicecidr.NewOptions()))
}

// TestGateOffDoesNotStart: with MultiCIDRServiceAllocator off the
// InitFunc starts nothing, as KCM skips the controller.
func TestGateOffDoesNotStart(t *testing.T) {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		servicecidr.FeatureMultiCIDRServiceAllocator: {Default: false,
			PreRelease: featuregate.Beta}}); err != nil {
		t.Fatal(err)
	}
	d := servicecidr.Descriptor(servicecidr.NewOptions())
	c, err := d.Init()(context.Background(), descriptor.Context{Name: d.Name(), FeatureGate: fg})
	if c != nil || err != nil {
		t.Errorf("Init with the gate off = %v, %v; want nil, nil", c, err)
	}
}

// TestManagerKeepsServiceCIDRs: under a Manager a ServiceCIDR gets the
// finalizer and Ready; deleted while an address only it holds is
// allocated, it turns Ready=False and keeps the finalizer; once the
// address goes, the finalizer does.
func TestManagerKeepsServiceCIDRs(t *testing.T) {
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/24"}}}
	ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.100.0.10",
		Labels: map[string]string{
			networkingv1.LabelIPAddressFamily: "IPv4",
			networkingv1.LabelManagedBy:       "ipallocator.k8s.io"}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Resource: "services", Namespace: "default", Name: "web"}}}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{servicecidr.Descriptor(servicecidr.NewOptions())},
		sc, ip).Start()
	cidrs := h.Client.NetworkingV1().ServiceCIDRs()
	get := func() *networkingv1.ServiceCIDR {
		v, err := cidrs.Get(t.Context(), "extra", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	readyIs := func(status metav1.ConditionStatus) bool {
		c := apimeta.FindStatusCondition(get().Status.Conditions,
			networkingv1.ServiceCIDRConditionReady)
		return c != nil && c.Status == status
	}
	managertest.Eventually(t, "the finalizer and Ready=True", func() bool {
		return slices.Contains(get().Finalizers, servicecidr.Finalizer) &&
			readyIs(metav1.ConditionTrue)
	})
	// The fake clientset keeps nothing for finalizers: mark the
	// ServiceCIDR deleted as the API server would, past the grace period.
	v := get()
	past := metav1.NewTime(time.Now().Add(-time.Minute))
	v.DeletionTimestamp = &past
	if _, err := cidrs.Update(t.Context(), v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "Ready=False", func() bool {
		return readyIs(metav1.ConditionFalse)
	})
	if !slices.Contains(get().Finalizers, servicecidr.Finalizer) {
		t.Fatal("the finalizer of a ServiceCIDR holding an address was removed")
	}
	if err := h.Client.NetworkingV1().IPAddresses().Delete(t.Context(), ip.Name,
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the finalizer removed", func() bool {
		return !slices.Contains(get().Finalizers, servicecidr.Finalizer)
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
