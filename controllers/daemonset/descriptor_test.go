package daemonset_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/daemonset"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	d := daemonset.Descriptor(daemonset.NewOptions())
	controllertest.CheckIdentity(
		t,
		d,
		controllertest.Identity{Name: "daemonset-controller", Alias: "daemonset"},
	)
	if _, sharded := d.IsSharded(); sharded {
		t.Error("descriptor is sharded; DaemonSets span every node")
	}
	o := daemonset.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"concurrent-daemonset-syncs",
		"--concurrent-daemonset-syncs=7",
	)
	if f.DefValue != "2" ||
		f.Usage != "The number of daemonset objects that are allowed to sync concurrently. Larger number = more responsive daemonsets, but more CPU (and network) load" {
		t.Errorf("default %q usage %q", f.DefValue, f.Usage)
	}
	if o.ConcurrentDaemonSetSyncs != 7 {
		t.Errorf("ConcurrentDaemonSetSyncs %d, want 7", o.ConcurrentDaemonSetSyncs)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       daemonset.Options
		wantErr []string
	}{
		{"defaults", daemonset.NewOptions(), nil},
		{"zero workers", daemonset.Options{},
			[]string{
				`descriptor "daemonset-controller": --concurrent-daemonset-syncs: must be at least 1, got 0`,
			}},
		{"negative workers", daemonset.Options{ConcurrentDaemonSetSyncs: -2},
			[]string{"--concurrent-daemonset-syncs: must be at least 1, got -2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, daemonset.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestFeatureSpecs(t *testing.T) {
	want := map[featuregate.Feature]bool{
		daemonset.FeatureStaleControllerConsistency:         true,
		daemonset.FeatureTaintTolerationComparisonOperators: false,
	}
	specs := daemonset.FeatureSpecs()
	if len(specs) != len(want) {
		t.Errorf("%d specs, want %d", len(specs), len(want))
	}
	for f, def := range want {
		if s, ok := specs[f]; !ok || s.Default != def {
			t.Errorf("%s: %+v, want default %v", f, s, def)
		}
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue and the
// back-off collector even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, daemonset.Descriptor(daemonset.NewOptions()))
}

// TestManagerRunsDaemonPods: hosted by a Manager over a fake clientset, the
// controller creates a pod for each node and reports it in status.
func TestManagerRunsDaemonPods(t *testing.T) {
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  "ns",
			Name:       "agent",
			UID:        "uid-agent",
			Generation: 1,
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "img"}},
				},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	h := managertest.New(
		t,
		"test",
		[]descriptor.Descriptor{daemonset.Descriptor(daemonset.NewOptions())},
		ds,
		node("a"),
		node("b"),
	)
	// The fake API server names pods from generateName, as a real one does.
	var n atomic.Int64
	h.Client.PrependReactor(
		"create",
		"pods",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			if p, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod); ok &&
				p.Name == "" {
				id := n.Add(1)
				p.Name = fmt.Sprintf("%s%d", p.GenerateName, id)
				p.UID = types.UID(fmt.Sprintf("pod-%d", id))
			}
			return false, nil, nil
		},
	)
	h.Start()
	controllertest.WaitFor(t, "two daemon pods and desiredNumberScheduled 2", func() bool {
		pods, err := h.Client.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
		if err != nil || len(pods.Items) != 2 {
			return false
		}
		got, err := h.Client.AppsV1().
			DaemonSets("ns").
			Get(t.Context(), "agent", metav1.GetOptions{})
		return err == nil && got.Status.DesiredNumberScheduled == 2 &&
			got.Status.ObservedGeneration == 1
	})
	revs, err := h.Client.AppsV1().ControllerRevisions("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(revs.Items) != 1 {
		t.Errorf("revisions %v, %v; want one", revs, err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
