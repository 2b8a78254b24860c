package ttlafterfinished_test

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/ttlafterfinished"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		ttlafterfinished.Descriptor(ttlafterfinished.NewOptions()),
		controllertest.Identity{
			Name: "ttl-after-finished-controller", Alias: "ttl-after-finished",
		},
	)
	o := ttlafterfinished.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"concurrent-ttl-after-finished-syncs",
		"--concurrent-ttl-after-finished-syncs=9",
	)
	if f.DefValue != "5" ||
		f.Usage != "The number of ttl-after-finished-controller workers that are allowed to sync concurrently." {
		t.Errorf("default %q usage %q", f.DefValue, f.Usage)
	}
	if o.ConcurrentTTLSyncs != 9 {
		t.Errorf("ConcurrentTTLSyncs %d, want 9", o.ConcurrentTTLSyncs)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       ttlafterfinished.Options
		wantErr []string
	}{
		{"defaults", ttlafterfinished.NewOptions(), nil},
		{"zero value takes the default", ttlafterfinished.Options{}, nil},
		{"negative workers", ttlafterfinished.Options{ConcurrentTTLSyncs: -1},
			[]string{
				`descriptor "ttl-after-finished-controller": --concurrent-ttl-after-finished-syncs: must be at least 1, got -1`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, ttlafterfinished.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestManagerDeletesFinishedJob(t *testing.T) {
	job := func(name string, finished bool) *batchv1.Job {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:       batchv1.JobSpec{TTLSecondsAfterFinished: ptr.To[int32](0)},
		}
		if finished {
			j.Status.Conditions = []batchv1.JobCondition{{
				Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute)),
			}}
		}
		return j
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{ttlafterfinished.Descriptor(ttlafterfinished.NewOptions())},
		job("done", true), job("running", false)).
		Start()
	gone := func(name string) bool {
		_, err := h.Client.BatchV1().Jobs("ns").Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	controllertest.WaitFor(t, "the finished job to be deleted", func() bool { return gone("done") })

	// Finishing the running job makes it go too.
	j, err := h.Client.BatchV1().Jobs("ns").Get(t.Context(), "running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Status.Conditions = job("x", true).Status.Conditions
	if _, err := h.Client.BatchV1().Jobs("ns").UpdateStatus(t.Context(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(
		t,
		"the job finished later to be deleted",
		func() bool { return gone("running") },
	)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(
		t,
		ttlafterfinished.Descriptor(ttlafterfinished.NewOptions()),
	)
}
