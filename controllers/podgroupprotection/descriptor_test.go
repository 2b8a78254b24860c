package podgroupprotection_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/podgroupprotection"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

var (
	podGroups = schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups")
	pods      = corev1.SchemeGroupVersion.WithResource("pods")
)

func TestDescriptor(t *testing.T) {
	d := podgroupprotection.Descriptor(podgroupprotection.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name: "podgroup-protection-controller"})
	o := podgroupprotection.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	if got := d.Served(); !slices.Equal(got, []schema.GroupVersionResource{podGroups}) {
		t.Errorf("served %v, want PodGroups only", got)
	}
	if _, ok := d.Indexers(pods)[podgroupprotection.ActivePodsByPodGroup]; !ok {
		t.Errorf("the pod index %s is not declared", podgroupprotection.ActivePodsByPodGroup)
	}
	if _, ok := d.Reads()[podGroups]; ok {
		t.Error("PodGroups are pruned; the controller writes back the cached object")
	}
	if _, ok := d.IsSharded(); ok {
		t.Error("sharded; PodGroup informers are not filtered to a slot")
	}
	controllertest.CheckBuild(t, d) // the declared reads name fields
}

func TestFeatureSpecs(t *testing.T) {
	specs := podgroupprotection.FeatureSpecs()
	s, ok := specs[podgroupprotection.FeatureGenericWorkload]
	if len(specs) != 1 || !ok || s.Default || s.PreRelease != featuregate.Beta {
		t.Errorf("FeatureSpecs() = %+v, want GenericWorkload, beta, off", specs)
	}
	if err := featuregate.NewFeatureGate().Add(specs); err != nil {
		t.Fatalf("the specs do not register: %v", err)
	}
}

// gates returns a gate knowing the controller's gate, with overrides.
func gates(t *testing.T, on map[string]bool) featuregate.MutableFeatureGate {
	t.Helper()
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(podgroupprotection.FeatureSpecs()); err != nil {
		t.Fatal(err)
	}
	if err := fg.SetFromMap(on); err != nil {
		t.Fatal(err)
	}
	return fg
}

// TestGates: the controller starts only with GenericWorkload on, so not by
// default, as in KCM; its Run releases what Init took even when the term
// ended first.
func TestGates(t *testing.T) {
	d := podgroupprotection.Descriptor(podgroupprotection.NewOptions())
	for _, tt := range []struct {
		name  string
		fg    featuregate.FeatureGate
		start bool
	}{
		{"no gate: the default", nil, false},
		{"a gate without the feature: the default", featuregate.NewFeatureGate(), false},
		{"the defaults", gates(t, nil), false},
		{"GenericWorkload on", gates(t, map[string]bool{"GenericWorkload": true}), true},
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

// served lists PodGroups in the fake's discovery.
var served = []*metav1.APIResourceList{{
	GroupVersion: "scheduling.k8s.io/v1beta1",
	APIResources: []metav1.APIResource{{Name: "podgroups", Kind: "PodGroup", Namespaced: true,
		Verbs: []string{"get", "list", "watch", "update"}}}}}

// TestManagerReleasesPodGroups: under a Manager with the gate on and
// PodGroups served, a deleted PodGroup an active pod names keeps the
// finalizer until the pod goes; one no pod names loses it at once.
func TestManagerReleasesPodGroups(t *testing.T) {
	now := metav1.Now()
	pg := func(name string) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, DeletionTimestamp: &now,
			Finalizers: []string{podgroupprotection.Finalizer}}}
	}
	user := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "user"},
		Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{
			PodGroupName: ptr.To("used")}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{podgroupprotection.Descriptor(podgroupprotection.NewOptions())},
		pg("used"), pg("free"), user)
	h.Client.Resources = served
	h.Builder.WithFeatureGate(gates(t, map[string]bool{"GenericWorkload": true}))
	h.Start()
	h.WaitRunning(podgroupprotection.Name)
	protected := func(name string) bool {
		g, err := h.Client.SchedulingV1beta1().PodGroups("ns").Get(t.Context(), name,
			metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(g.Finalizers, podgroupprotection.Finalizer)
	}
	managertest.Eventually(t, "the free PodGroup released", func() bool {
		return !protected("free")
	})
	if !protected("used") {
		t.Fatal("the finalizer of a PodGroup a running pod names was removed")
	}
	if err := h.Client.CoreV1().Pods("ns").Delete(t.Context(), "user",
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the used PodGroup released", func() bool {
		return !protected("used")
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestManagerWaitsUntilServed: without PodGroups served the controller
// waits, unserved and ready, instead of on a cache that never syncs.
func TestManagerWaitsUntilServed(t *testing.T) {
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{podgroupprotection.Descriptor(podgroupprotection.NewOptions())})
	h.Builder.WithFeatureGate(gates(t, map[string]bool{"GenericWorkload": true}))
	h.Start()
	h.WaitFor(podgroupprotection.Name, manager.PhaseUnserved)
	h.WaitHealthy("/readyz")
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
