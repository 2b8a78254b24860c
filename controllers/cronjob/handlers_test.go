package cronjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestHandlers: CronJob and Job events enqueue the CronJob concerned; a
// changed schedule or time zone waits for its next time instead.
func TestHandlers(t *testing.T) {
	cj := cronJob(
		"*/5 * * * *",
		at("2026-03-01T11:00:00Z"),
		lastScheduled(at("2026-03-01T12:00:00Z")),
	)
	other := cronJob(
		"* * * * *",
		epoch,
		func(c *batchv1.CronJob) { c.Name, c.UID = "other", "other-uid" },
	)
	f := newFixture(t, epoch, cj, other)
	drain := func() []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		keys := f.enqueued
		f.enqueued = nil
		return keys
	}
	owned := job(cj, "j")
	owned.ResourceVersion = "1"
	tests := []struct {
		name  string
		event func()
		want  []string
	}{
		{"cronjob added", func() { f.c.enqueue(cj) }, []string{"ns/cj"}},
		{"cronjob deleted (tombstone)", func() {
			f.c.enqueue(cache.DeletedFinalStateUnknown{Key: "ns/cj", Obj: cj})
		}, []string{"ns/cj"}},
		{"cronjob updated, same schedule", func() {
			c := cj.DeepCopy()
			c.Spec.Suspend = ptr.To(true)
			f.c.updateCronJob(cj, c)
		}, []string{"ns/cj"}},
		{"job added", func() { f.c.addJob(owned) }, []string{"ns/cj"}},
		{"job updated", func() {
			j := owned.DeepCopy()
			j.ResourceVersion = "2"
			f.c.updateJob(owned, j)
		}, []string{"ns/cj"}},
		{"job resync (same resourceVersion)", func() { f.c.updateJob(owned, owned) }, nil},
		{"job moved to another controller: both", func() {
			j := job(other, "j")
			j.ResourceVersion = "2"
			f.c.updateJob(owned, j)
		}, []string{"ns/cj", "ns/other"}},
		{"job deleted (tombstone)", func() {
			f.c.jobGone(cache.DeletedFinalStateUnknown{Key: "ns/j", Obj: owned})
		}, []string{"ns/cj"}},
		{"orphan job", func() {
			f.c.addJob(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "o"}})
		}, nil},
		{"job of a CronJob with another UID", func() {
			j := owned.DeepCopy()
			j.OwnerReferences[0].UID = "stale"
			f.c.addJob(j)
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.event()
			got := drain()
			if len(got) != len(tt.want) {
				t.Fatalf("enqueued %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("enqueued %q, want %q", got, tt.want)
				}
			}
		})
	}

	t.Run("schedule changed: requeued for the new schedule's next time", func(t *testing.T) {
		c := cj.DeepCopy()
		c.Spec.Schedule = "*/2 * * * *"
		f.c.updateCronJob(cj, c)
		if got := drain(); len(got) != 0 {
			t.Errorf("enqueued now %q", got)
		}
		if d, ok := f.requeues["ns/cj"]; !ok || d != 90*time.Second+requeueSlack {
			t.Errorf("requeue %v (%v), want 1m30.1s", d, ok)
		}
	})
	t.Run("schedule changed to one that does not parse: warned, not requeued", func(t *testing.T) {
		delete(f.requeues, "ns/cj")
		c := cj.DeepCopy()
		c.Spec.Schedule = "never"
		f.c.updateCronJob(cj, c)
		if _, ok := f.requeues["ns/cj"]; ok {
			t.Error("requeued")
		}
		if r := f.reasons(); len(r) != 1 || r[0] != "UnParseableCronJobSchedule" {
			t.Errorf("events %q", r)
		}
	})
}
