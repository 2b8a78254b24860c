package pvcprotection_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/pvcprotection"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/shard"
)

var pods = corev1.SchemeGroupVersion.WithResource("pods")

func TestDescriptor(t *testing.T) {
	d := pvcprotection.Descriptor(pvcprotection.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name: "persistentvolumeclaim-protection-controller", Alias: "pvc-protection"})
	o := pvcprotection.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	if k, ok := d.IsSharded(); !ok || k != shard.ByNamespace {
		t.Error("not sharded by namespace")
	}
	if _, ok := d.Indexers(pods)[index.PodsByClaim]; !ok {
		t.Errorf("the pod index %s is not declared", index.PodsByClaim)
	}
	for _, r := range index.PodsByClaimReads {
		if !slices.Contains(d.Reads()[pods], r) {
			t.Errorf("the index reads %s, which is not declared", r)
		}
	}
	controllertest.CheckBuild(t, d) // the declared reads name fields
}

func TestFeatureSpecs(t *testing.T) {
	specs := pvcprotection.FeatureSpecs()
	s, ok := specs[pvcprotection.FeaturePersistentVolumeClaimUnusedSinceTime]
	if len(specs) != 1 || !ok || !s.Default || s.PreRelease != featuregate.Beta {
		t.Errorf("FeatureSpecs() = %+v, want PersistentVolumeClaimUnusedSinceTime, beta, on", specs)
	}
	if err := featuregate.NewFeatureGate().Add(specs); err != nil {
		t.Fatalf("the specs do not register: %v", err)
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		pvcprotection.Descriptor(pvcprotection.NewOptions()))
}

// TestManagerProtectsClaims: under a Manager a claim gets the finalizer; a
// deleted one that a scheduled pod uses keeps it until the pod goes; a
// bound claim no pod uses is marked Unused.
func TestManagerProtectsClaims(t *testing.T) {
	claim := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name}}
	}
	idle := claim("idle")
	idle.Status.Phase = corev1.ClaimBound
	user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "user"},
		Spec: corev1.PodSpec{NodeName: "node-a", Volumes: []corev1.Volume{{Name: "v",
			VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: "data"}}}}}}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{pvcprotection.Descriptor(pvcprotection.NewOptions())},
		claim("data"), idle, user).Start()
	claims := h.Client.CoreV1().PersistentVolumeClaims("ns")
	get := func(name string) *corev1.PersistentVolumeClaim {
		c, err := claims.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	protected := func(name string) func() bool {
		return func() bool { return slices.Contains(get(name).Finalizers, pvcprotection.Finalizer) }
	}
	managertest.Eventually(t, "the finalizer added", protected("data"))
	managertest.Eventually(t, "the idle claim marked Unused", func() bool {
		c := get("idle").Status.Conditions
		return len(c) == 1 && c[0].Type == corev1.PersistentVolumeClaimUnused &&
			c[0].Status == corev1.ConditionTrue
	})
	// The fake clientset keeps an object with finalizers: mark it deleted
	// as the API server would.
	c := get("data")
	now := metav1.Now()
	c.DeletionTimestamp = &now
	if _, err := claims.Update(t.Context(), c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A claim created after it is synced after it: once it is protected,
	// the deleted one has been looked at.
	if _, err := claims.Create(t.Context(), claim("probe"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the probe protected", protected("probe"))
	if !protected("data")() {
		t.Fatal("the finalizer of a claim in use was removed")
	}
	if err := h.Client.CoreV1().Pods("ns").Delete(t.Context(), "user",
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the finalizer removed", func() bool { return !protected("data")() })
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
