package podgc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/podgc"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := podgc.Descriptor(podgc.NewOptions())
	if d.Name() != "pod-garbage-collector-controller" {
		t.Errorf("name %q", d.Name())
	}
	if a := d.Aliases(); len(a) != 1 || a[0] != "podgc" {
		t.Errorf("aliases %q, want [podgc]", a)
	}
	if d.IsDisabledByDefault() {
		t.Error("disabled by default; KCM enables it")
	}
}

func TestFlags(t *testing.T) {
	o := podgc.NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	f := fs.Lookup("terminated-pod-gc-threshold")
	if f == nil {
		t.Fatal("--terminated-pod-gc-threshold not registered")
	}
	if f.DefValue != "12500" {
		t.Errorf("default %q, want 12500", f.DefValue)
	}
	if !strings.Contains(f.Usage, "If <= 0, the terminated pod garbage collector is disabled.") {
		t.Errorf("usage %q", f.Usage)
	}
	if err := fs.Parse([]string{"--terminated-pod-gc-threshold=7"}); err != nil {
		t.Fatal(err)
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
		{"zero threshold disables, as in KCM", func(o *podgc.Options) { o.TerminatedPodGCThreshold = 0 }, nil},
		{"negative threshold disables, as in KCM", func(o *podgc.Options) { o.TerminatedPodGCThreshold = -5 }, nil},
		{"zero durations take the defaults", func(o *podgc.Options) { o.GCCheckPeriod, o.QuarantineTime = 0, 0 }, nil},
		{"negative durations", func(o *podgc.Options) { o.GCCheckPeriod, o.QuarantineTime = -time.Second, -time.Second },
			[]string{"pod-garbage-collector-controller", "GCCheckPeriod: must not be negative", "QuarantineTime: must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := podgc.NewOptions()
			tt.mutate(&o)
			_, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).Register(podgc.Descriptor(o)).Build()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Build succeeded")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// waitFor polls cond every 10ms for up to 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
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
	h := managertest.New(t, "test", []descriptor.Descriptor{podgc.Descriptor(podgc.NewOptions())},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stuck", DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fine"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
	).Start()
	waitFor(t, "the unscheduled terminating pod to be deleted", podGone(t, h.Client, "stuck"))
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
	h := managertest.New(t, "test", []descriptor.Descriptor{podgc.Descriptor(o)},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "here"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orphan"}, Spec: corev1.PodSpec{NodeName: "gone"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bound"}, Spec: corev1.PodSpec{NodeName: "here"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	).Start()
	// The ticker is created once the first pass has ended.
	waitFor(t, "the first pass", clk.HasWaiters)
	if podGone(t, h.Client, "orphan")() {
		t.Fatal("orphan deleted before the quarantine ended")
	}
	clk.Step(podgc.DefaultQuarantineTime)
	waitFor(t, "the orphaned pod to be deleted", podGone(t, h.Client, "orphan"))
	if podGone(t, h.Client, "bound")() {
		t.Error("a pod on an existing node was deleted")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

type clients struct{ cs kubernetes.Interface }

func (c clients) Config(string) (*rest.Config, error) { return nil, errors.New("no config") }
func (c clients) Client(string) (kubernetes.Interface, error) {
	return c.cs, nil
}
func (c clients) MetadataClient(string) (metadata.Interface, error) {
	return nil, errors.New("no metadata client")
}

func TestRunWithCancelledContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cs := fake.NewClientset()
	f := informers.NewSharedInformerFactory(cs, 0)
	c, err := podgc.Descriptor(podgc.NewOptions()).Init()(t.Context(), descriptor.Context{
		Name: podgc.Name, ClientBuilder: clients{cs}, InformerFactory: f,
	})
	if err != nil || c == nil {
		t.Fatalf("Init = %v, %v", c, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
