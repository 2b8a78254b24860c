package tainteviction_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/tainteviction"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := tainteviction.Descriptor(tainteviction.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{Name: "taint-eviction-controller"})
	o := tainteviction.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	specs := tainteviction.FeatureSpecs()
	if s := specs[tainteviction.FeatureSeparateTaintEvictionController]; !s.Default ||
		!s.LockToDefault {
		t.Errorf("SeparateTaintEvictionController %+v, want on and locked (GA)", s)
	}
	if s := specs[tainteviction.FeatureTaintTolerationComparisonOperators]; s.Default {
		t.Errorf("TaintTolerationComparisonOperators %+v, want off (alpha)", s)
	}
	reads := d.Reads()
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	if len(reads[pods]) != 2 {
		t.Errorf("reads of a pod %q, want its node and tolerations", reads[pods])
	}
	if len(d.Indexers(pods)) != 1 {
		t.Errorf("pod indexers %v, want the pods-by-node one", d.Indexers(pods))
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		tainteviction.Descriptor(tainteviction.NewOptions()))
}

// TestManagerEvicts: under a Manager, of the pods on a node with a
// NoExecute taint, the one that does not tolerate it is marked and
// deleted, the one that tolerates it for an hour is not (yet), and a
// pod added later that does not tolerate it is deleted too.
func TestManagerEvicts(t *testing.T) {
	taint := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}}
	pod := func(name string, tolerations ...corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.PodSpec{NodeName: "n", Tolerations: tolerations}}
	}
	hour := corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists,
		Effect: taint.Effect, TolerationSeconds: ptr.To[int64](3600)}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{tainteviction.Descriptor(tainteviction.NewOptions())},
		node, pod("none"), pod("hour", hour)).Start()
	gone := func(name string) bool {
		_, err := h.Client.CoreV1().Pods("ns").Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	managertest.Eventually(t, "the untolerating pod deleted", func() bool { return gone("none") })
	if _, err := h.Client.CoreV1().Pods("ns").Create(t.Context(), pod("later"),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the pod added later deleted", func() bool { return gone("later") })
	if gone("hour") {
		t.Error("the pod tolerating the taint for an hour was deleted")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
