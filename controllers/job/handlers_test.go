package job

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// TestHandlersObserveExpectations: a pod's creation, deletion and
// finalizer removal, seen by the handlers, meet the expectations the sync
// recorded; unrelated pods meet nothing.
func TestHandlersObserveExpectations(t *testing.T) {
	j := newJob("work", started)
	f := newFixture(t, objects(j))
	key := "ns/work"

	f.c.exp.ExpectCreations(key, 1)
	f.c.addPod(cached(t, newPod("other", newJob("other")))[0], false)
	if f.c.exp.Satisfied(key) {
		t.Fatal("another Job's pod met the creation")
	}
	f.c.addPod(cached(t, newPod("a", j))[0], false)
	if !f.c.exp.Satisfied(key) {
		t.Error("the pod's creation was not observed")
	}

	f.c.exp.ExpectDeletions(key, []string{"ns/a"})
	gone := cached(t, newPod("a", j))[0]
	f.c.deletePod(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: gone}, true)
	if !f.c.exp.Satisfied(key) {
		t.Error("the pod's deletion (tombstone) was not observed")
	}

	f.c.finalizerExp.expect(key, []types.UID{"uid-b"})
	old := newPod("b", j)
	cur := newPod("b", j, withoutFinalizer, func(p *corev1.Pod) { p.ResourceVersion = "2" })
	f.c.updatePod(cached(t, old)[0], cached(t, cur)[0])
	if len(f.c.finalizerExp.expected(key)) != 0 {
		t.Error("the finalizer removal was not observed")
	}
}

// TestUpdateJobRequeuesForNewDeadline: a changed activeDeadlineSeconds
// schedules a sync for when it passes.
func TestUpdateJobRequeuesForNewDeadline(t *testing.T) {
	old := newJob("work", started)
	f := newFixture(t, objects(old))
	f.clock.Step(5 * time.Second)
	cur := old.DeepCopy()
	cur.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	cur.Generation++
	f.c.updateJob(old, cur)
	if d, ok := f.lastRequeue(); !ok || d != 55*time.Second {
		t.Errorf("requeue %v %v, want 55s", d, ok)
	}
}

// TestJobGoneForgetsState: syncing a deleted Job drops its expectations
// and back-off record.
func TestJobGoneForgetsState(t *testing.T) {
	f := newFixture(t, nil)
	key := "ns/gone"
	f.c.exp.ExpectCreations(key, 3)
	f.c.finalizerExp.expect(key, []types.UID{"x"})
	f.c.backoff.update(backoffRecord{key: key, failuresAfterLastSuccess: 2})
	if err := f.sync(key); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := f.c.exp.Pending(key); ok {
		t.Error("expectations kept")
	}
	if f.c.finalizerExp.expected(key) != nil {
		t.Error("finalizer expectations kept")
	}
	if _, ok := f.c.backoff.get(key); ok {
		t.Error("back-off record kept")
	}
}

// TestOrphanSelectorKey: a finished Job's selector key releases every
// pod it selects; malformed keys are dropped.
func TestOrphanSelectorKey(t *testing.T) {
	j := newJob("work", func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue},
		}
	})
	f := newFixture(t, objects(j, newPod("a", j), newPod("b", j)))
	f.c.enqueueSelector(j)
	if err := f.c.syncOrphan(f.t.Context(), "selector/ns/batch.kubernetes.io/controller-uid=uid-work"); err != nil {
		t.Fatal(err)
	}
	if n := f.count("patch pods"); n != 2 {
		t.Errorf("%d finalizers removed, want 2", n)
	}
	for _, bad := range []string{"pod", "nope/ns/x", "selector/ns/!!=="} {
		if err := f.c.syncOrphan(f.t.Context(), bad); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}

// TestUnknownCompletionMode: a Job with a completion mode this version
// does not know is left alone, with a Warning event.
func TestUnknownCompletionMode(t *testing.T) {
	j := newJob(
		"work",
		func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.CompletionMode("Sparse")) },
	)
	f := newFixture(t, objects(j))
	if err := f.sync("ns/work"); err != nil {
		t.Fatal(err)
	}
	if len(f.actions()) != 0 {
		t.Errorf("actions %v", f.actions())
	}
	if ev := f.events(); !controllertest.HasEvent(ev,
		"Warning UnknownCompletionMode Skipped Job sync because completion mode is unknown") {
		t.Errorf("events %v", ev)
	}
}

// TestNewControllerNeedsRecorder: without an event recorder the
// controller is not built (a host always passes one).
func TestNewControllerNeedsRecorder(t *testing.T) {
	f := newFixture(t, nil)
	_, err := newController(
		config{
			name:    "x",
			client:  f.client,
			jobs:    f.factory.Batch().V1().Jobs(),
			pods:    f.factory.Core().V1().Pods(),
			workers: 1,
		},
	)
	if err == nil || !strings.Contains(err.Error(), "recorder must not be nil") {
		t.Errorf("error %v", err)
	}
}
