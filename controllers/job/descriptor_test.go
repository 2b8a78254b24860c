package job_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/job"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/shard"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		job.Descriptor(job.NewOptions()),
		controllertest.Identity{Name: "job-controller", Alias: "job"},
	)
	o := job.NewOptions()
	f := controllertest.ParseFlag(t, o.AddFlags, "concurrent-job-syncs", "--concurrent-job-syncs=9")
	if f.DefValue != "5" ||
		f.Usage != "The number of job objects that are allowed to sync concurrently. Larger number = more responsive jobs, but more CPU (and network) load" {
		t.Errorf("default %q usage %q", f.DefValue, f.Usage)
	}
	if o.ConcurrentJobSyncs != 9 {
		t.Errorf("ConcurrentJobSyncs %d, want 9", o.ConcurrentJobSyncs)
	}
	if keying, sharded := job.Descriptor(job.NewOptions()).IsSharded(); !sharded ||
		keying != shard.ByNamespace {
		t.Errorf(
			"IsSharded = %v, %v; want sharded by namespace (a Job and its pods share one)",
			keying,
			sharded,
		)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       job.Options
		wantErr []string
	}{
		{"defaults", job.NewOptions(), nil},
		{
			"zero workers",
			job.Options{},
			[]string{
				`descriptor "job-controller": --concurrent-job-syncs: must be at least 1, got 0`,
			},
		},
		{
			"negative workers",
			job.Options{ConcurrentJobSyncs: -3},
			[]string{"--concurrent-job-syncs: must be at least 1, got -3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, job.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestFeatureSpecs(t *testing.T) {
	want := map[featuregate.Feature]bool{
		job.FeatureJobManagedBy: true, job.FeatureMutableSchedulingDirectivesForSuspendedJobs: true, job.FeatureStaleControllerConsistencyJob: true,
	}
	specs := job.FeatureSpecs()
	if len(specs) != len(want) {
		t.Errorf("%d gates, want %d", len(specs), len(want))
	}
	for f, def := range want {
		if s, ok := specs[f]; !ok || s.Default != def {
			t.Errorf("gate %s: %+v, want default %v", f, s, def)
		}
	}
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(specs); err != nil {
		t.Fatalf("the specs do not register: %v", err)
	}
}

// TestRunWithCancelledContext: Run returns and releases both queues even
// when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, job.Descriptor(job.NewOptions()))
}

// TestManagerRunsJob: in a Manager over a fake clientset, a Job of two
// completions gets a pod with the tracking finalizer; once the pods
// succeed (played here) the Job completes with succeeded 2.
func TestManagerRunsJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options func(*managertest.Harness)
	}{
		{"on the leader", func(*managertest.Harness) {}},
		{"sharded", func(h *managertest.Harness) { h.ShardedAlone("a", slots) }},
	} {
		t.Run(tc.name, func(t *testing.T) { runJob(t, tc.options) })
	}
}

const slots = 4

func runJob(t *testing.T, options func(*managertest.Harness)) {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "work", UID: "uid-work"},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](
				1,
			), Completions: ptr.To[int32](2), BackoffLimit: ptr.To[int32](6),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "work"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": "work"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "c", Image: "img"}},
				},
			},
		},
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{job.Descriptor(job.NewOptions())}, j)
	// The fake API server neither names pods from generateName nor gives
	// them UIDs; a real one does both.
	var n atomic.Int64
	h.Client.PrependReactor(
		"create",
		"pods",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			if p, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod); ok &&
				p.Name == "" {
				id := n.Add(1)
				p.Name = fmt.Sprintf("%s%d", p.GenerateName, id)
				p.UID = types.UID(fmt.Sprintf("pod-uid-%d", id))
			}
			return false, nil, nil
		},
	)
	options(h)
	h.Start()
	if h.Options.Sharding.Enabled {
		managertest.Eventually(t, "every slot held", func() bool {
			st, _ := h.Manager.Status(job.Name)
			return len(st.Slots) == slots
		})
	}
	ctx := t.Context()
	succeeded := 0
	controllertest.WaitFor(t, "the Job to complete", func() bool {
		pods, err := h.Client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase == "" {
				// Play the kubelet: the pod runs to completion.
				p.Status.Phase = corev1.PodSucceeded
				if _, err := h.Client.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil {
					succeeded++
				}
			}
		}
		got, err := h.Client.BatchV1().Jobs("ns").Get(ctx, "work", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return got.Status.Succeeded == 2
			}
		}
		return false
	})
	if succeeded != 2 {
		t.Errorf("%d pods were created and succeeded, want 2", succeeded)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
