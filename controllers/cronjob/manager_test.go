package cronjob_test

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/cronjob"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestManagerStartsDueJob: in a Manager, with a fake clock half a minute
// past a schedule time, the CronJob's Job for that time is created and
// listed in status.active: on the leader, and sharded by namespace under
// --enable-sharding (the one replica then holds every slot).
func TestManagerStartsDueJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options func(*managertest.Harness)
	}{
		{"on the leader", func(*managertest.Harness) {}},
		{"sharded", func(h *managertest.Harness) { h.ShardedAlone("a", slots) }},
	} {
		t.Run(tc.name, func(t *testing.T) { startsDueJob(t, tc.options) })
	}
}

const slots = 4

func startsDueJob(t *testing.T, options func(*managertest.Harness)) {
	now := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	o := cronjob.NewOptions()
	o.Clock = clocktesting.NewFakeClock(now)
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         "ns",
			Name:              "cj",
			UID:               "cj-uid",
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
		},
		Spec: batchv1.CronJobSpec{
			Schedule: "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "i"}},
				}}},
			},
		},
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{cronjob.Descriptor(o)}, cj)
	options(h)
	h.Start()
	if h.Options.Sharding.Enabled {
		managertest.Eventually(t, "every slot held", func() bool {
			st, _ := h.Manager.Status(cronjob.Name)
			return len(st.Slots) == slots
		})
	}
	controllertest.WaitFor(t, "the due Job to be listed in status.active", func() bool {
		got, err := h.Client.BatchV1().CronJobs("ns").Get(t.Context(), "cj", metav1.GetOptions{})
		return err == nil && len(got.Status.Active) == 1 &&
			got.Status.Active[0].Name == "cj-29539440"
	})
	if _, err := h.Client.BatchV1().Jobs("ns").Get(t.Context(), "cj-29539440", metav1.GetOptions{}); err != nil {
		t.Errorf("the Job: %v", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
