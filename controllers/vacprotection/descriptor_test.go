package vacprotection_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/vacprotection"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := vacprotection.Descriptor(vacprotection.NewOptions())
	controllertest.CheckIdentity(t, d,
		controllertest.Identity{Name: "volumeattributesclass-protection-controller"})
	o := vacprotection.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	if _, sharded := d.IsSharded(); sharded {
		t.Error("sharded; the controller reads claims of every namespace")
	}
	spec, ok := vacprotection.FeatureSpecs()[vacprotection.FeatureVolumeAttributesClass]
	if !ok || !spec.Default || !spec.LockToDefault {
		t.Errorf("VolumeAttributesClass spec = %+v, want on and locked (GA in 1.37)", spec)
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		vacprotection.Descriptor(vacprotection.NewOptions()))
}

// TestGateOffDoesNotStart: with VolumeAttributesClass off the InitFunc
// starts nothing, as KCM skips the controller.
func TestGateOffDoesNotStart(t *testing.T) {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		vacprotection.FeatureVolumeAttributesClass: {Default: false,
			PreRelease: featuregate.Beta}}); err != nil {
		t.Fatal(err)
	}
	d := vacprotection.Descriptor(vacprotection.NewOptions())
	c, err := d.Init()(context.Background(), descriptor.Context{Name: d.Name(), FeatureGate: fg})
	if c != nil || err != nil {
		t.Errorf("Init with the gate off = %v, %v; want nil, nil", c, err)
	}
}

// TestManagerProtectsClasses: under a Manager a class gets the finalizer,
// and a deleted one keeps it until the last claim naming it goes.
func TestManagerProtectsClasses(t *testing.T) {
	vac := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"},
		DriverName: "csi.example.com"}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			VolumeAttributesClassName: ptr.To("gold")}}
	spare := vac.DeepCopy()
	spare.Name = "spare"
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{vacprotection.Descriptor(vacprotection.NewOptions())},
		vac, spare, pvc).Start()
	classes := h.Client.StorageV1().VolumeAttributesClasses()
	get := func(name string) *storagev1.VolumeAttributesClass {
		v, err := classes.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	protected := func(name string) bool {
		return slices.Contains(get(name).Finalizers, vacprotection.Finalizer)
	}
	managertest.Eventually(t, "the finalizers added", func() bool {
		return protected("gold") && protected("spare")
	})
	// The fake clientset keeps nothing for finalizers: mark both classes
	// deleted as the API server would, the one in use first. One worker
	// takes them in that order: once the unused one is released, the
	// other was synced.
	for _, name := range []string{"gold", "spare"} {
		v := get(name)
		now := metav1.Now()
		v.DeletionTimestamp = &now
		if _, err := classes.Update(t.Context(), v, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	managertest.Eventually(t, "the unused class released", func() bool {
		return !protected("spare")
	})
	if !protected("gold") {
		t.Fatal("the finalizer of a class in use was removed")
	}
	if err := h.Client.CoreV1().PersistentVolumeClaims("ns").Delete(t.Context(), "data",
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the finalizer removed", func() bool {
		return !protected("gold")
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
