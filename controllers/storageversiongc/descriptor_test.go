package storageversiongc_test

import (
	"slices"
	"testing"

	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/storageversiongc"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

var storageVersions = apiserverinternalv1alpha1.SchemeGroupVersion.WithResource("storageversions")

func TestDescriptor(t *testing.T) {
	d := storageversiongc.Descriptor(storageversiongc.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name: "storageversion-garbage-collector-controller", Alias: "storage-version-gc"})
	o := storageversiongc.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	if got := d.Served(); !slices.Equal(got, []schema.GroupVersionResource{storageVersions}) {
		t.Errorf("served %v, want StorageVersions only", got)
	}
	specs := storageversiongc.FeatureSpecs()
	if s := specs[storageversiongc.FeatureAPIServerIdentity]; !s.Default ||
		s.PreRelease != featuregate.Beta {
		t.Errorf("APIServerIdentity spec %+v, want beta, on", s)
	}
	if s := specs[storageversiongc.FeatureStorageVersionAPI]; s.Default ||
		s.PreRelease != featuregate.Alpha {
		t.Errorf("StorageVersionAPI spec %+v, want alpha, off", s)
	}
}

// gates returns a gate knowing the controller's gates, with overrides.
func gates(t *testing.T, on map[string]bool) featuregate.MutableFeatureGate {
	t.Helper()
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(storageversiongc.FeatureSpecs()); err != nil {
		t.Fatal(err)
	}
	if err := fg.SetFromMap(on); err != nil {
		t.Fatal(err)
	}
	return fg
}

// TestGates: the controller starts only with both gates on, so not by
// default, as in KCM.
func TestGates(t *testing.T) {
	d := storageversiongc.Descriptor(storageversiongc.NewOptions())
	for _, tt := range []struct {
		name  string
		fg    featuregate.FeatureGate
		start bool
	}{
		{"no gate: the defaults", nil, false},
		{"the defaults", gates(t, nil), false},
		{"StorageVersionAPI on", gates(t, map[string]bool{"StorageVersionAPI": true}), true},
		{"APIServerIdentity off", gates(t, map[string]bool{"StorageVersionAPI": true,
			"APIServerIdentity": false}), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset()
			c, err := d.Init()(t.Context(), descriptor.Context{Name: d.Name(),
				FeatureGate: tt.fg, ClientBuilder: controllertest.ClientBuilder(cs, nil),
				InformerFactory: informers.NewSharedInformerFactory(cs, 0)})
			if err != nil {
				t.Fatal(err)
			}
			if (c != nil) != tt.start {
				t.Fatalf("Init = %v; want a controller: %v", c, tt.start)
			}
			if c != nil {
				controllertest.RunCancelled(t, c)
			}
		})
	}
}

// TestManagerCollects: under a Manager with the gates on and
// StorageVersions served, the entry of an API server without an identity
// lease goes at once, and another's when its lease is deleted, with the
// StorageVersion it was the last entry of.
func TestManagerCollects(t *testing.T) {
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceSystem, Name: name,
			Labels: map[string]string{"apiserver.kubernetes.io/identity": "kube-apiserver"}}}
	}
	entry := func(id string) apiserverinternalv1alpha1.ServerStorageVersion {
		return apiserverinternalv1alpha1.ServerStorageVersion{APIServerID: id,
			EncodingVersion: "apps/v1", DecodableVersions: []string{"apps/v1"}}
	}
	sv := &apiserverinternalv1alpha1.StorageVersion{
		ObjectMeta: metav1.ObjectMeta{Name: "apps.deployments"},
		Status: apiserverinternalv1alpha1.StorageVersionStatus{
			StorageVersions: []apiserverinternalv1alpha1.ServerStorageVersion{
				entry("alive"), entry("ghost")}}}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{storageversiongc.Descriptor(storageversiongc.NewOptions())},
		lease("alive"), sv)
	h.Client.Resources = []*metav1.APIResourceList{{
		GroupVersion: "internal.apiserver.k8s.io/v1alpha1",
		APIResources: []metav1.APIResource{{Name: "storageversions", Kind: "StorageVersion",
			Verbs: []string{"get", "list", "watch", "update", "delete"}}}}}
	h.Builder.WithFeatureGate(gates(t, map[string]bool{"StorageVersionAPI": true}))
	h.Start()
	h.WaitRunning(storageversiongc.Name)
	svs := h.Client.InternalV1alpha1().StorageVersions()
	managertest.Eventually(t, "the ghost's entry removed", func() bool {
		got, err := svs.Get(t.Context(), sv.Name, metav1.GetOptions{})
		return err == nil && len(got.Status.StorageVersions) == 1 &&
			got.Status.StorageVersions[0].APIServerID == "alive"
	})
	if err := h.Client.CoordinationV1().Leases(metav1.NamespaceSystem).Delete(t.Context(),
		"alive", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the StorageVersion deleted", func() bool {
		_, err := svs.Get(t.Context(), sv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestManagerWaitsUntilServed: without StorageVersions served the
// controller waits, unserved and ready, instead of on a cache that never
// syncs.
func TestManagerWaitsUntilServed(t *testing.T) {
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{storageversiongc.Descriptor(storageversiongc.NewOptions())})
	h.Builder.WithFeatureGate(gates(t, map[string]bool{"StorageVersionAPI": true}))
	h.Start()
	h.WaitFor(storageversiongc.Name, manager.PhaseUnserved)
	h.WaitHealthy("/readyz")
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
