package disruption_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/disruption"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := disruption.Descriptor(disruption.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{Name: "disruption-controller",
		Alias: "disruption", EventSource: "controllermanager"})
	o := disruption.NewOptions()
	controllertest.ParseFlag(t, o.AddFlags, "concurrent-disruption-syncs",
		"--concurrent-disruption-syncs=3")
	if o.ConcurrentDisruptionSyncs != 3 || disruption.NewOptions().ConcurrentDisruptionSyncs != 1 {
		t.Errorf("--concurrent-disruption-syncs=3 gave %d (default %d), want 3 (default 1)",
			o.ConcurrentDisruptionSyncs, disruption.NewOptions().ConcurrentDisruptionSyncs)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := disruption.NewOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.ConcurrentDisruptionSyncs = 0
	controllertest.CheckBuild(t, disruption.Descriptor(o), "--concurrent-disruption-syncs")
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, disruption.Descriptor(disruption.NewOptions()))
}

// TestManagerKeepsBudgetStatus: under a Manager (fake clients, pruned
// caches) a budget's status counts its ready pods, and follows a pod that
// stops being ready.
func TestManagerKeepsBudgetStatus(t *testing.T) {
	labels := map[string]string{"app": "web"}
	mk := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: labels},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{disruption.Descriptor(disruption.NewOptions())},
		pdb, mk("a"), mk("b")).Start()
	allowed := func(want int32) func() bool {
		return func() bool {
			p, err := h.Client.PolicyV1().PodDisruptionBudgets("default").Get(t.Context(), "web",
				metav1.GetOptions{})
			return err == nil && p.Status.ObservedGeneration == 1 &&
				p.Status.ExpectedPods == 2 && p.Status.DisruptionsAllowed == want
		}
	}
	managertest.Eventually(t, "one disruption allowed", allowed(1))
	b := mk("b")
	b.Status.Conditions[0].Status = corev1.ConditionFalse
	if _, err := h.Client.CoreV1().Pods("default").UpdateStatus(t.Context(), b,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "no disruption allowed", allowed(0))
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
