package differential_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// TestEventSummary: the namespace's events become sorted, de-duplicated
// "kind reason" pairs, without the skipped ones, the API server's repair
// loops' and other namespaces'; the summary survives Normalise and EventsOf
// reads it back.
func TestEventSummary(t *testing.T) {
	ev := func(ns, name, kind, reason string) runtime.Object {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: kind}, Reason: reason}
	}
	repair := func(name, reporter, reason string) runtime.Object {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "diff-native-x7k2p", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Service"}, Reason: reason,
			ReportingController: reporter,
		}
	}
	cs := fake.NewClientset(
		repair("6", "ipallocator-repair-controller", "ClusterIPNotAllocated"),
		repair("7", "portallocator-repair-controller", "PortNotAllocated"),
		ev("diff-native-x7k2p", "1", "Pod", "Killing"), ev("diff-native-x7k2p", "2", "ReplicaSet", "SuccessfulCreate"),
		ev("diff-native-x7k2p", "3", "ReplicaSet", "SuccessfulCreate"), ev("diff-native-x7k2p", "4", "Service", "ClusterIPNotAllocated"),
		ev("b", "5", "Job", "Completed"),
	)
	skip := func(e corev1.Event) bool { return e.Reason == "Killing" }
	sum, err := differential.EventSummary(t.Context(), cs, "diff-native-x7k2p", skip)
	if err != nil {
		t.Fatal(err)
	}
	got := differential.EventsOf(differential.Normalise([]runtime.Object{sum}, "diff-native-x7k2p", nil))
	if want := "ReplicaSet SuccessfulCreate\nService ClusterIPNotAllocated"; got != want {
		t.Errorf("EventsOf = %q, want %q", got, want)
	}
	if got := differential.EventsOf(nil); got != "" {
		t.Errorf("EventsOf(nil) = %q, want empty", got)
	}
}
