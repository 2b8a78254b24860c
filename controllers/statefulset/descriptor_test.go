package statefulset_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/statefulset"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	d := statefulset.Descriptor(statefulset.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{Name: "statefulset-controller",
		Alias: "statefulset"})
	if _, sharded := d.IsSharded(); sharded {
		t.Error("descriptor is sharded")
	}
	o := statefulset.NewOptions()
	f := controllertest.ParseFlag(t, o.AddFlags, "concurrent-statefulset-syncs",
		"--concurrent-statefulset-syncs=7")
	if f.DefValue != "5" || f.Usage != "The number of statefulset objects that are allowed "+
		"to sync concurrently. Larger number = more responsive statefulsets, but more CPU "+
		"(and network) load" {
		t.Errorf("default %q usage %q", f.DefValue, f.Usage)
	}
	if o.ConcurrentStatefulSetSyncs != 7 {
		t.Errorf("ConcurrentStatefulSetSyncs %d, want 7", o.ConcurrentStatefulSetSyncs)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       statefulset.Options
		wantErr []string
	}{
		{"defaults", statefulset.NewOptions(), nil},
		{"zero workers", statefulset.Options{},
			[]string{"--concurrent-statefulset-syncs (ConcurrentStatefulSetSyncs): " +
				"must be at least 1, got 0"}},
		{"negative workers", statefulset.Options{ConcurrentStatefulSetSyncs: -2},
			[]string{"must be at least 1, got -2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, statefulset.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestFeatureSpecs(t *testing.T) {
	want := map[featuregate.Feature]bool{
		statefulset.FeatureMaxUnavailable:             true,
		statefulset.FeatureStaleControllerConsistency: true,
		statefulset.FeatureSemanticRevisionComparison: true,
		statefulset.FeatureRecreateStrategy:           false,
	}
	specs := statefulset.FeatureSpecs()
	if len(specs) != len(want) {
		t.Errorf("%d specs, want %d", len(specs), len(want))
	}
	for f, def := range want {
		stage := featuregate.Beta
		if f == statefulset.FeatureRecreateStrategy {
			stage = featuregate.Alpha
		}
		if s, ok := specs[f]; !ok || s.Default != def || s.PreRelease != stage {
			t.Errorf("%s: %+v, want %s, default %v", f, s, stage, def)
		}
	}
}

func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		statefulset.Descriptor(statefulset.NewOptions()))
}

// TestManagerRunsStatefulSet: hosted by a Manager over a fake clientset
// (whose pods never run), the controller creates web-0 and its claim and
// waits for it, as OrderedReady wants.
func TestManagerRunsStatefulSet(t *testing.T) {
	labels := map[string]string{"app": "web"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web",
			Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
					Image: "img"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{
		statefulset.Descriptor(statefulset.NewOptions())}, set)
	h.Start()
	controllertest.WaitFor(t, "web-0, its claim, and observedGeneration 1", func() bool {
		pods, err := h.Client.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "web-0" {
			return false
		}
		_, err = h.Client.CoreV1().PersistentVolumeClaims("ns").Get(t.Context(),
			"data-web-0", metav1.GetOptions{})
		if err != nil {
			return false
		}
		got, err := h.Client.AppsV1().StatefulSets("ns").Get(t.Context(), "web",
			metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == 1 &&
			got.Status.UpdateRevision != ""
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
