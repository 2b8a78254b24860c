package podgc_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/podgc"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(t, podgc.Descriptor(podgc.NewOptions()), controllertest.Identity{
		Name: "pod-garbage-collector-controller", Alias: "podgc",
	})
}

func TestFlags(t *testing.T) {
	o := podgc.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"terminated-pod-gc-threshold",
		"--terminated-pod-gc-threshold=7",
	)
	if f.DefValue != "12500" {
		t.Errorf("default %q, want 12500", f.DefValue)
	}
	if !strings.Contains(f.Usage, "If <= 0, the terminated pod garbage collector is disabled.") {
		t.Errorf("usage %q", f.Usage)
	}
	if o.TerminatedPodGCThreshold != 7 {
		t.Errorf("threshold %d after parsing, want 7", o.TerminatedPodGCThreshold)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*podgc.Options)
		wantErr []string
	}{
		{"defaults", func(*podgc.Options) {}, nil},
		{
			"zero threshold disables, as in KCM",
			func(o *podgc.Options) { o.TerminatedPodGCThreshold = 0 },
			nil,
		},
		{
			"negative threshold disables, as in KCM",
			func(o *podgc.Options) { o.TerminatedPodGCThreshold = -5 },
			nil,
		},
		{
			"zero durations take the defaults",
			func(o *podgc.Options) { o.GCCheckPeriod, o.QuarantineTime = 0, 0 },
			nil,
		},
		{
			"negative durations",
			func(o *podgc.Options) { o.GCCheckPeriod, o.QuarantineTime = -time.Second, -time.Second },
			[]string{
				"pod-garbage-collector-controller",
				"GCCheckPeriod: must not be negative",
				"QuarantineTime: must not be negative",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := podgc.NewOptions()
			tt.mutate(&o)
			controllertest.CheckBuild(t, podgc.Descriptor(o), tt.wantErr...)
		})
	}
}

func podGone(t *testing.T, cs kubernetes.Interface, name string) func() bool {
	return func() bool {
		_, err := cs.CoreV1().Pods("ns").Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

func TestManagerDeletesUnscheduledTerminatingPod(t *testing.T) {
	now := metav1.Now()
	h := managertest.New(
		t,
		"test",
		[]descriptor.Descriptor{podgc.Descriptor(podgc.NewOptions())},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stuck", DeletionTimestamp: &now},
			Status:     corev1.PodStatus{Phase: corev1.PodPending},
		},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fine"},
			Status:     corev1.PodStatus{Phase: corev1.PodPending},
		},
	).Start()
	controllertest.WaitFor(
		t,
		"the unscheduled terminating pod to be deleted",
		podGone(t, h.Client, "stuck"),
	)
	if podGone(t, h.Client, "fine")() {
		t.Error("an unscheduled pod that is not terminating was deleted")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerDeletesOrphansAfterQuarantine(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	o := podgc.NewOptions()
	o.Clock = clk
	h := managertest.New(
		t,
		"test",
		[]descriptor.Descriptor{podgc.Descriptor(o)},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "here"}},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orphan"},
			Spec:       corev1.PodSpec{NodeName: "gone"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bound"},
			Spec:       corev1.PodSpec{NodeName: "here"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		},
	).Start()
	// The ticker is created once the first pass has ended.
	controllertest.WaitFor(t, "the first pass", clk.HasWaiters)
	if podGone(t, h.Client, "orphan")() {
		t.Fatal("orphan deleted before the quarantine ended")
	}
	clk.Step(podgc.DefaultQuarantineTime)
	controllertest.WaitFor(t, "the orphaned pod to be deleted", podGone(t, h.Client, "orphan"))
	if podGone(t, h.Client, "bound")() {
		t.Error("a pod on an existing node was deleted")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, podgc.Descriptor(podgc.NewOptions()))
}
