package pvprotection_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/pvprotection"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(t, pvprotection.Descriptor(pvprotection.NewOptions()),
		controllertest.Identity{
			Name: "persistentvolume-protection-controller", Alias: "pv-protection"})
	o := pvprotection.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		pvprotection.Descriptor(pvprotection.NewOptions()))
}

// TestManagerProtectsVolumes: under a Manager a volume gets the finalizer,
// and a deleted bound one keeps it until it is released.
func TestManagerProtectsVolumes(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{pvprotection.Descriptor(pvprotection.NewOptions())},
		pv).Start()
	get := func() *corev1.PersistentVolume {
		v, err := h.Client.CoreV1().PersistentVolumes().Get(
			t.Context(), "data", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	managertest.Eventually(t, "the finalizer added", func() bool {
		return slices.Contains(get().Finalizers, pvprotection.Finalizer)
	})
	// The fake clientset keeps an object with finalizers: mark it deleted
	// as the API server would.
	v := get()
	now := metav1.Now()
	v.DeletionTimestamp = &now
	if _, err := h.Client.CoreV1().PersistentVolumes().Update(
		t.Context(), v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.WaitHealthy("/readyz")
	if !slices.Contains(get().Finalizers, pvprotection.Finalizer) {
		t.Fatal("the finalizer of a bound volume was removed")
	}
	v = get()
	v.Status.Phase = corev1.VolumeReleased
	if _, err := h.Client.CoreV1().PersistentVolumes().UpdateStatus(t.Context(), v,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the finalizer removed", func() bool {
		return !slices.Contains(get().Finalizers, pvprotection.Finalizer)
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
