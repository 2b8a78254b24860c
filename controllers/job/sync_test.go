package job

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// TestCreatesUpToParallelismAndRemainingCompletions: a sync creates
// min(parallelism, completions - succeeded) - active pods (parallelism
// alone without completions, none once one succeeded), each with the
// tracking finalizer and the template's labels.
func TestCreatesUpToParallelismAndRemainingCompletions(t *testing.T) {
	tests := []struct {
		name                     string
		parallelism              int32
		completions              *int32
		succeededCounted, active int
		succeededUncounted       int
		wantCreates, wantActive  int32
	}{
		{
			name:        "parallelism below completions",
			parallelism: 2,
			completions: ptr.To[int32](5),
			wantCreates: 2,
			wantActive:  2,
		},
		{
			name:        "completions below parallelism",
			parallelism: 5,
			completions: ptr.To[int32](3),
			wantCreates: 3,
			wantActive:  3,
		},
		{
			name:             "some succeeded",
			parallelism:      4,
			completions:      ptr.To[int32](5),
			succeededCounted: 2,
			wantCreates:      3,
			wantActive:       3,
		},
		{
			name:               "an uncounted success counts",
			parallelism:        4,
			completions:        ptr.To[int32](2),
			succeededUncounted: 1,
			wantCreates:        1,
			wantActive:         1,
		},
		{
			name:        "some active",
			parallelism: 3,
			completions: ptr.To[int32](10),
			active:      2,
			wantCreates: 1,
			wantActive:  3,
		},
		{name: "no completions: parallelism", parallelism: 3, wantCreates: 3, wantActive: 3},
		{
			name:             "no completions, one succeeded: no more",
			parallelism:      3,
			active:           1,
			succeededCounted: 1,
			wantCreates:      0,
			wantActive:       1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob("work", parallelism(tt.parallelism), started, func(j *batchv1.Job) {
				j.Spec.Completions = tt.completions
				j.Status.Succeeded = int32(tt.succeededCounted)
			})
			objs := objects(j)
			for i := range tt.active {
				objs = append(objs, newPod("active-"+string(rune('a'+i)), j, running))
			}
			for i := range tt.succeededUncounted {
				objs = append(
					objs,
					newPod("done-"+string(rune('a'+i)), j, finished(corev1.PodSucceeded, 0, epoch)),
				)
			}
			f := newFixture(t, objs)
			if err := f.sync("ns/work"); err != nil {
				t.Fatal(err)
			}
			created := f.createdPods()
			if int32(len(created)) != tt.wantCreates {
				t.Fatalf("created %d pods, want %d", len(created), tt.wantCreates)
			}
			for _, p := range created {
				if !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) ||
					p.Labels["batch.kubernetes.io/job-name"] != "work" ||
					p.GenerateName != "work-" ||
					!metav1.IsControlledBy(p, j) {
					t.Errorf(
						"created pod %+v lacks the finalizer, labels, generateName or controller",
						p.ObjectMeta,
					)
				}
			}
			if got := f.job("work").Status.Active; got != tt.wantActive {
				t.Errorf("status.active %d, want %d", got, tt.wantActive)
			}
			if n := len(f.events()); int32(n) != tt.wantCreates {
				t.Errorf("%d events, want %d SuccessfulCreate", n, tt.wantCreates)
			}
		})
	}
}

// TestFinalizerRemovedAfterCounting: a succeeded pod is first written to
// status.uncountedTerminatedPods, then loses its finalizer, then moves to
// status.succeeded; with completions reached the Job gets
// SuccessCriteriaMet and, in the same write, Complete.
func TestFinalizerRemovedAfterCounting(t *testing.T) {
	j := newJob("work", started, completions(1))
	f := newFixture(t, objects(j, newPod("p", j, finished(corev1.PodSucceeded, 0, epoch))))
	if err := f.sync("ns/work"); err != nil {
		t.Fatal(err)
	}
	want := []string{"update jobs/status", "patch pods", "update jobs/status"}
	if got := f.actions(); !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	writes := f.statusWrites()
	if u := writes[0].UncountedTerminatedPods; len(u.Succeeded) != 1 || u.Succeeded[0] != "uid-p" ||
		writes[0].Succeeded != 0 {
		t.Errorf(
			"first write: uncounted %+v succeeded %d, want [uid-p] and 0",
			u,
			writes[0].Succeeded,
		)
	}
	if c := findCondition(writes[0].Conditions, batchv1.JobSuccessCriteriaMet); c == nil ||
		c.Reason != batchv1.JobReasonCompletionsReached {
		t.Errorf("first write lacks SuccessCriteriaMet: %+v", writes[0].Conditions)
	}
	last := writes[1]
	if len(last.UncountedTerminatedPods.Succeeded) != 0 || last.Succeeded != 1 ||
		last.CompletionTime == nil {
		t.Errorf("second write: %+v", last)
	}
	if c := findCondition(last.Conditions, batchv1.JobComplete); c == nil ||
		c.Status != corev1.ConditionTrue {
		t.Errorf("second write lacks Complete: %+v", last.Conditions)
	}
	if p := f.apiPods()[0]; len(p.Finalizers) != 0 {
		t.Errorf("pod still has finalizers %v", p.Finalizers)
	}
	if ev := f.events(); !controllertest.HasEvent(ev, "Normal Completed Job completed") {
		t.Errorf("events %v lack Completed", ev)
	}
	// Delivered: the finished Job is not synced again.
	f.deliver()
	f.clearActions()
	if err := f.sync("ns/work"); err != nil || len(f.actions()) != 0 {
		t.Errorf("sync of the finished Job: %v, actions %v", err, f.actions())
	}
}

// TestFinalizerExpectations: a pod whose finalizer removal is expected but
// not yet observed is not counted a second time.
func TestFinalizerExpectations(t *testing.T) {
	j := newJob("work", started, completions(3), parallelism(1))
	j.Status.Succeeded = 1 // the pod was counted already
	f := newFixture(t, objects(j, newPod("p", j, finished(corev1.PodSucceeded, 0, epoch))))
	f.c.finalizerExp.expect("ns/work", []typesUID{"uid-p"})
	if err := f.sync("ns/work"); err != nil {
		t.Fatal(err)
	}
	st := f.job("work").Status
	if st.Succeeded != 1 || len(st.UncountedTerminatedPods.Succeeded) != 0 {
		t.Errorf(
			"succeeded %d uncounted %v: the pod was counted twice",
			st.Succeeded,
			st.UncountedTerminatedPods.Succeeded,
		)
	}
	if f.count("patch pods") != 0 {
		t.Errorf("actions %v: the finalizer was removed again", f.actions())
	}
}

// TestBackoffRemaining: the pod-creation back-off after n consecutive
// failures is 10s·2^(n-1), capped at 10 minutes, counted from the last
// failure.
func TestBackoffRemaining(t *testing.T) {
	tests := []struct {
		failures int32
		elapsed  time.Duration
		want     time.Duration
	}{
		{0, 0, 0},
		{1, 0, 10 * time.Second},
		{2, 0, 20 * time.Second},
		{3, 0, 40 * time.Second},
		{4, 0, 80 * time.Second},
		{6, 0, 320 * time.Second},
		{7, 0, 10 * time.Minute},
		{20, 0, 10 * time.Minute},
		{1, 4 * time.Second, 6 * time.Second},
		{3, 40 * time.Second, 0},
		{3, time.Minute, 0},
	}
	for _, tt := range tests {
		clk := clockAt(epoch.Add(tt.elapsed))
		last := epoch
		if got := backoffRemaining(clk, tt.failures, &last); got != tt.want {
			t.Errorf("%d failures, %v since: %v, want %v", tt.failures, tt.elapsed, got, tt.want)
		}
	}
}

// TestBackoffDelaysReplacement: after a pod failed, its replacement waits
// 10s (a requeue for then); after a second failure 20s; stepping the fake
// clock past the wait lets the sync create it.
func TestBackoffDelaysReplacement(t *testing.T) {
	j := newJob("work", started, completions(1))
	f := newFixture(t, objects(j))
	f.mustSync("ns/work")
	for i, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
		pods := f.apiPods()
		var live string
		for _, p := range pods {
			if p.Status.Phase == "" || p.Status.Phase == corev1.PodPending {
				live = p.Name
			}
		}
		if live == "" {
			t.Fatalf("round %d: no live pod among %d", i, len(pods))
		}
		f.setPod(live, finished(corev1.PodFailed, 1, f.clock.Now()))
		f.deliver()
		f.clearActions()
		f.mustSync("ns/work") // counts the failure
		if n := len(f.createdPods()); n != 0 {
			t.Fatalf("round %d: created %d pods during the back-off", i, n)
		}
		if d, ok := f.lastRequeue(); !ok || d != wait {
			t.Fatalf("round %d: requeue %v %v, want %v", i, d, ok, wait)
		}
		f.clock.Step(wait - time.Second)
		f.clearActions()
		f.mustSync("ns/work")
		if n := len(f.createdPods()); n != 0 {
			t.Fatalf("round %d: created %d pods 1s before the back-off ends", i, n)
		}
		if d, _ := f.lastRequeue(); d != time.Second {
			t.Errorf("round %d: requeue %v, want the 1s left", i, d)
		}
		f.clock.Step(time.Second)
		f.clearActions()
		f.mustSync("ns/work")
		if n := len(f.createdPods()); n != 1 {
			t.Fatalf("round %d: created %d pods after the back-off, want 1", i, n)
		}
	}
	if st := f.job("work").Status; st.Failed != 2 {
		t.Errorf("failed %d, want 2", st.Failed)
	}
}

// TestBackoffRecord: only failures after the newest success count.
func TestBackoffRecord(t *testing.T) {
	j := newJob("work")
	at := func(name string, phase corev1.PodPhase, s int) *corev1.Pod {
		p := newPod(name, j, finished(phase, 1, epoch.Add(time.Duration(s)*time.Second)))
		return cached(t, p)[0]
	}
	tests := []struct {
		name      string
		succeeded []*corev1.Pod
		failed    []*corev1.Pod
		wantN     int32
		wantLast  *time.Time
	}{
		{"nothing", nil, nil, 0, nil},
		{
			"two failures",
			nil,
			[]*corev1.Pod{at("a", corev1.PodFailed, 5), at("b", corev1.PodFailed, 3)},
			2,
			ptr.To(epoch.Add(5 * time.Second)),
		},
		{"a success resets", []*corev1.Pod{at("s", corev1.PodSucceeded, 9)}, nil, 0, nil},
		{"failures after the success count", []*corev1.Pod{at("s", corev1.PodSucceeded, 4)},
			[]*corev1.Pod{
				at("a", corev1.PodFailed, 2),
				at("b", corev1.PodFailed, 6),
				at("c", corev1.PodFailed, 8),
			}, 2, ptr.To(epoch.Add(8 * time.Second))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newBackoffStore().next("ns/work", tt.succeeded, tt.failed)
			if r.failuresAfterLastSuccess != tt.wantN ||
				!ptr.Equal(r.lastFailureTime, tt.wantLast) {
				t.Errorf(
					"record %d %v, want %d %v",
					r.failuresAfterLastSuccess,
					r.lastFailureTime,
					tt.wantN,
					tt.wantLast,
				)
			}
		})
	}
}

// TestBackoffLimitExceeded: with more failures than backoffLimit the Job
// gets FailureTarget, its active pods are deleted and counted failed, and
// once none is left it is Failed (BackoffLimitExceeded) with a Warning.
func TestBackoffLimitExceeded(t *testing.T) {
	j := newJob(
		"work",
		started,
		completions(3),
		parallelism(2),
		func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](1) },
	)
	f := newFixture(t, objects(j,
		newPod("f1", j, finished(corev1.PodFailed, 1, epoch)),
		newPod("f2", j, finished(corev1.PodFailed, 1, epoch)),
		newPod("run", j, running)))
	f.mustSync("ns/work")
	st := f.job("work").Status
	if c := findCondition(st.Conditions, batchv1.JobFailureTarget); c == nil ||
		c.Reason != batchv1.JobReasonBackoffLimitExceeded {
		t.Fatalf("conditions %+v lack FailureTarget BackoffLimitExceeded", st.Conditions)
	}
	if f.count("delete pods") != 1 {
		t.Errorf("actions %v: the running pod was not deleted", f.actions())
	}
	// The fake API server deletes at once; the Job finishes in the next sync.
	f.mustSync("ns/work")
	st = f.job("work").Status
	if c := findCondition(st.Conditions, batchv1.JobFailed); c == nil ||
		c.Reason != batchv1.JobReasonBackoffLimitExceeded ||
		c.Message != "Job has reached the specified backoff limit" {
		t.Fatalf("conditions %+v lack Failed BackoffLimitExceeded", st.Conditions)
	}
	// The deleted running pod counts as failed too, as in KCM.
	if st.Failed != 3 || st.Active != 0 || st.CompletionTime != nil {
		t.Errorf("status %+v, want failed 3, active 0, no completionTime", st)
	}
	if ev := f.events(); !controllertest.HasEvent(ev,
		"Warning BackoffLimitExceeded Job has reached the specified backoff limit") {
		t.Errorf("events %v", ev)
	}
}

// TestActiveDeadline: before the deadline the Job is requeued for it; at
// the deadline it fails with DeadlineExceeded.
func TestActiveDeadline(t *testing.T) {
	j := newJob(
		"work",
		started,
		func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) },
	)
	f := newFixture(t, objects(j, newPod("p", j, running)))
	f.clock.Step(10 * time.Second)
	f.mustSync("ns/work")
	if d, ok := f.lastRequeue(); !ok || d != 20*time.Second {
		t.Errorf("requeue %v %v, want 20s", d, ok)
	}
	if conditionOf(f.job("work"), batchv1.JobFailureTarget) != nil {
		t.Fatal("failed before the deadline")
	}
	f.clock.Step(20 * time.Second)
	f.mustSync("ns/work")
	f.mustSync("ns/work")
	jb := f.job("work")
	if c := conditionOf(jb, batchv1.JobFailed); c == nil ||
		c.Reason != batchv1.JobReasonDeadlineExceeded {
		t.Fatalf("conditions %+v lack Failed DeadlineExceeded", jb.Status.Conditions)
	}
	if jb.Status.Failed != 1 || len(f.apiPods()) != 0 {
		t.Errorf("failed %d with %d pods left, want 1 and 0", jb.Status.Failed, len(f.apiPods()))
	}
	if ev := f.events(); !controllertest.HasEvent(ev,
		"Warning DeadlineExceeded Job was active longer than specified deadline") {
		t.Errorf("events %v", ev)
	}
}

// TestSuspendResume: suspending deletes the active pods (removing their
// finalizers, not counting them), adds Suspended and clears startTime;
// resuming flips the condition to False (JobResumed), sets startTime and
// creates pods again.
func TestSuspendResume(t *testing.T) {
	j := newJob("work", started, completions(4), parallelism(2))
	f := newFixture(t, objects(j))
	f.mustSync("ns/work")
	if n := len(f.apiPods()); n != 2 {
		t.Fatalf("%d pods, want 2", n)
	}
	f.events()
	f.setJob("work", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })
	f.deliver()
	f.clearActions()
	f.mustSync("ns/work")
	jb := f.job("work")
	c := conditionOf(jb, batchv1.JobSuspended)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "JobSuspended" ||
		c.Message != "Job suspended" {
		t.Fatalf("Suspended condition %+v", c)
	}
	if jb.Status.StartTime != nil || jb.Status.Active != 0 || jb.Status.Failed != 0 ||
		len(f.apiPods()) != 0 {
		t.Errorf(
			"status %+v with %d pods: want no startTime, nothing active or failed, no pods",
			jb.Status,
			len(f.apiPods()),
		)
	}
	if ev := f.events(); !controllertest.HasEvent(ev, "Normal Suspended Job suspended") ||
		!controllertest.HasEvent(ev, "Normal SuccessfulDelete") {
		t.Errorf("events %v", ev)
	}

	f.clock.Step(time.Minute)
	f.setJob("work", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) })
	f.deliver()
	f.mustSync("ns/work")
	jb = f.job("work")
	c = conditionOf(jb, batchv1.JobSuspended)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "JobResumed" {
		t.Fatalf("Suspended condition after resuming %+v", c)
	}
	if jb.Status.StartTime == nil || !jb.Status.StartTime.Time.Equal(f.clock.Now()) ||
		len(f.apiPods()) != 2 {
		t.Errorf(
			"startTime %v (want %v), %d pods (want 2)",
			jb.Status.StartTime,
			f.clock.Now(),
			len(f.apiPods()),
		)
	}
	if ev := f.events(); !controllertest.HasEvent(ev, "Normal Resumed Job resumed") {
		t.Errorf("events %v", ev)
	}
}

// TestCreatedSuspended: a Job created suspended gets no startTime and no
// pods, only the Suspended condition.
func TestCreatedSuspended(t *testing.T) {
	f := newFixture(
		t,
		objects(newJob("work", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })),
	)
	f.mustSync("ns/work")
	jb := f.job("work")
	if jb.Status.StartTime != nil || len(f.apiPods()) != 0 ||
		conditionOf(jb, batchv1.JobSuspended) == nil {
		t.Errorf("status %+v, %d pods", jb.Status, len(f.apiPods()))
	}
}

// TestManagedByIgnored: a Job managed by another controller is neither
// given pods nor status, nor are its pods' finalizers removed; the
// built-in's own name, or no managedBy, is synced; with the gate off every
// Job is.
func TestManagedByIgnored(t *testing.T) {
	tests := []struct {
		name      string
		managedBy *string
		gateOff   bool
		wantSync  bool
	}{
		{"other controller", ptr.To("example.com/other"), false, false},
		{"the built-in", ptr.To(batchv1.JobControllerName), false, true},
		{"unset", nil, false, true},
		{"other controller, gate off", ptr.To("example.com/other"), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob(
				"work",
				completions(1),
				func(j *batchv1.Job) { j.Spec.ManagedBy = tt.managedBy },
			)
			j.Status.Conditions = nil
			var opts []fixtureOption
			if tt.gateOff {
				opts = append(opts, withoutManagedBy)
			}
			f := newFixture(
				t,
				objects(j, newPod("done", j, finished(corev1.PodSucceeded, 0, epoch))),
				opts...)
			if err := f.sync("ns/work"); err != nil {
				t.Fatal(err)
			}
			if synced := len(f.actions()) > 0; synced != tt.wantSync {
				t.Errorf("actions %v, want synced=%v", f.actions(), tt.wantSync)
			}
			if !tt.wantSync {
				err := f.c.releaseOrphan(f.t.Context(), cached(t, newPod("done", j))[0])
				if err != nil || len(f.actions()) != 0 {
					t.Errorf("orphan cleanup touched a foreign Job's pod: %v %v", err, f.actions())
				}
			}
		})
	}
}

// TestIndexedCreation: an Indexed Job's pods get the index annotation and
// label, hostname, JOB_COMPLETION_INDEX and generateName "<job>-<i>-",
// for the lowest indexes not done nor running.
func TestIndexedCreation(t *testing.T) {
	j := newJob("work", indexed, completions(5), parallelism(3), started, func(j *batchv1.Job) {
		j.Status.CompletedIndexes = "0"
		j.Status.Succeeded = 1
	})
	f := newFixture(t, objects(j, newPod("two", j, running, atIndex(2))))
	if err := f.sync("ns/work"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range f.createdPods() {
		ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		got = append(got, ix)
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != ix || p.Spec.Hostname != "work-"+ix ||
			p.GenerateName != "work-"+ix+"-" {
			t.Errorf(
				"pod for index %s: labels %v hostname %q generateName %q",
				ix,
				p.Labels,
				p.Spec.Hostname,
				p.GenerateName,
			)
		}
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" ||
			env[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod for index %s: env %+v", ix, env)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("created indexes %v, want [1 3]", got)
	}
}

// TestIndexedBookkeeping: succeeded pods' indexes join completedIndexes
// in the "1,3-5" form, without uncounted UIDs; duplicates and indexes
// beyond completions are not counted.
func TestIndexedBookkeeping(t *testing.T) {
	j := newJob("work", indexed, completions(7), parallelism(1), started, func(j *batchv1.Job) {
		j.Status.CompletedIndexes = "1,4"
		j.Status.Succeeded = 2
	})
	ok := func(name string, ix int) *corev1.Pod {
		return newPod(name, j, atIndex(ix), finished(corev1.PodSucceeded, 0, epoch))
	}
	f := newFixture(
		t,
		objects(
			j,
			ok("a", 3),
			ok("b", 5),
			ok("c", 3),
			ok("d", 9),
			newPod("r", j, running, atIndex(6)),
		),
	)
	if err := f.sync("ns/work"); err != nil {
		t.Fatal(err)
	}
	st := f.job("work").Status
	if st.CompletedIndexes != "1,3-5" || st.Succeeded != 4 ||
		len(st.UncountedTerminatedPods.Succeeded) != 0 {
		t.Errorf(
			"completedIndexes %q succeeded %d uncounted %v, want \"1,3-5\", 4, none",
			st.CompletedIndexes,
			st.Succeeded,
			st.UncountedTerminatedPods.Succeeded,
		)
	}
	if n := f.count("patch pods"); n != 4 {
		t.Errorf("%d finalizers removed, want 4 (every succeeded pod)", n)
	}
}

// TestBackoffLimitPerIndex: an index whose pod failed more often than
// backoffLimitPerIndex joins failedIndexes; its replacement carries the
// failure count; with maxFailedIndexes exceeded the Job fails.
func TestBackoffLimitPerIndex(t *testing.T) {
	perIndex := func(max *int32) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
			j.Spec.MaxFailedIndexes = max
			j.Spec.BackoffLimit = ptr.To[int32](1 << 30)
		}
	}
	t.Run("first failure: replaced with the count", func(t *testing.T) {
		j := newJob("work", indexed, completions(2), parallelism(2), started, perIndex(nil))
		f := newFixture(
			t,
			objects(
				j,
				newPod("a", j, atIndex(0), finished(corev1.PodFailed, 1, epoch.Add(-time.Minute))),
				newPod("b", j, running, atIndex(1)),
			),
		)
		f.mustSync("ns/work")
		created := f.createdPods()
		if len(created) != 1 ||
			created[0].Annotations[batchv1.JobIndexFailureCountAnnotation] != "1" {
			t.Fatalf("created %d pods, annotations %v", len(created), created)
		}
		if st := f.job("work").Status; st.FailedIndexes == nil || *st.FailedIndexes != "" {
			t.Errorf("failedIndexes %v, want \"\"", st.FailedIndexes)
		}
	})
	t.Run("limit reached: index failed, Job fails with FailedIndexes", func(t *testing.T) {
		j := newJob(
			"work",
			indexed,
			completions(2),
			parallelism(2),
			started,
			perIndex(nil),
			func(j *batchv1.Job) {
				j.Status.CompletedIndexes, j.Status.Succeeded = "1", 1
			},
		)
		failed := newPod(
			"a",
			j,
			atIndex(0),
			finished(corev1.PodFailed, 1, epoch),
			func(p *corev1.Pod) {
				p.Annotations[batchv1.JobIndexFailureCountAnnotation] = "1"
			},
		)
		f := newFixture(t, objects(j, failed))
		f.mustSync("ns/work")
		st := f.job("work").Status
		if st.FailedIndexes == nil || *st.FailedIndexes != "0" {
			t.Fatalf("failedIndexes %v, want 0", st.FailedIndexes)
		}
		if c := findCondition(st.Conditions, batchv1.JobFailed); c == nil ||
			c.Reason != batchv1.JobReasonFailedIndexes {
			t.Errorf("conditions %+v lack Failed FailedIndexes", st.Conditions)
		}
	})
	t.Run("maxFailedIndexes exceeded", func(t *testing.T) {
		j := newJob(
			"work",
			indexed,
			completions(4),
			parallelism(4),
			started,
			perIndex(ptr.To[int32](0)),
		)
		failed := newPod(
			"a",
			j,
			atIndex(2),
			finished(corev1.PodFailed, 1, epoch),
			func(p *corev1.Pod) {
				p.Annotations[batchv1.JobIndexFailureCountAnnotation] = "1"
			},
		)
		f := newFixture(t, objects(j, failed, newPod("b", j, running, atIndex(0))))
		f.mustSync("ns/work")
		f.mustSync("ns/work")
		st := f.job("work").Status
		if c := findCondition(st.Conditions, batchv1.JobFailed); c == nil ||
			c.Reason != batchv1.JobReasonMaxFailedIndexesExceeded {
			t.Errorf("conditions %+v lack Failed MaxFailedIndexesExceeded", st.Conditions)
		}
	})
}

// TestPodFailurePolicyInSync: a FailJob match fails the Job with reason
// PodFailurePolicy; an Ignore match neither counts nor fails it (though,
// as in KCM, it delays the replacement like any failure).
func TestPodFailurePolicyInSync(t *testing.T) {
	policy := func(action batchv1.PodFailurePolicyAction, code int32) func(*batchv1.Job) {
		return func(j *batchv1.Job) {
			j.Spec.BackoffLimit = ptr.To[int32](0)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{
				Rules: []batchv1.PodFailurePolicyRule{{
					Action: action,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						Operator: batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:   []int32{code},
					},
				}},
			}
		}
	}
	t.Run("FailJob", func(t *testing.T) {
		j := newJob("work", started, policy(batchv1.PodFailurePolicyActionFailJob, 42))
		f := newFixture(t, objects(j, newPod("p", j, finished(corev1.PodFailed, 42, epoch))))
		f.mustSync("ns/work")
		st := f.job("work").Status
		c := findCondition(st.Conditions, batchv1.JobFailed)
		if c == nil || c.Reason != batchv1.JobReasonPodFailurePolicy ||
			c.Message != "Container c for pod ns/p failed with exit code 42 matching FailJob rule at index 0" {
			t.Errorf("Failed condition %+v", c)
		}
		if ft := findCondition(st.Conditions, batchv1.JobFailureTarget); ft == nil ||
			ft.Reason != batchv1.JobReasonPodFailurePolicy {
			t.Errorf("FailureTarget condition %+v", ft)
		}
	})
	t.Run("Ignore", func(t *testing.T) {
		j := newJob("work", started, policy(batchv1.PodFailurePolicyActionIgnore, 42))
		f := newFixture(t, objects(j, newPod("p", j, finished(corev1.PodFailed, 42, epoch))))
		f.mustSync("ns/work")
		st := f.job("work").Status
		if st.Failed != 0 || isFinished(f.job("work")) ||
			conditionOf(f.job("work"), batchv1.JobFailureTarget) != nil {
			t.Errorf("status %+v: an ignored failure counted", st)
		}
		// As in KCM, an ignored failure still delays the replacement.
		if d, ok := f.lastRequeue(); len(f.createdPods()) != 0 || !ok ||
			d != podFailureBackoffBase {
			t.Errorf(
				"created %d replacements, requeue %v %v; want none and the 10s back-off",
				len(f.createdPods()),
				d,
				ok,
			)
		}
	})
}

// TestSuccessPolicyInSync: index 0 succeeding satisfies
// succeededIndexes "0": SuccessCriteriaMet (SuccessPolicy), the other
// pods deleted with their finalizers removed, then Complete.
func TestSuccessPolicyInSync(t *testing.T) {
	j := newJob("work", indexed, completions(3), parallelism(3), started, func(j *batchv1.Job) {
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{
			Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}},
		}
	})
	f := newFixture(t, objects(j,
		newPod("a", j, atIndex(0), finished(corev1.PodSucceeded, 0, epoch)),
		newPod("b", j, atIndex(1), running), newPod("c", j, atIndex(2))))
	f.mustSync("ns/work")
	st := f.job("work").Status
	if c := findCondition(st.Conditions, batchv1.JobSuccessCriteriaMet); c == nil ||
		c.Reason != batchv1.JobReasonSuccessPolicy ||
		c.Message != "Matched rules at index 0" {
		t.Fatalf("conditions %+v", st.Conditions)
	}
	if f.count("delete pods") != 2 {
		t.Errorf("actions %v: want the two other pods deleted", f.actions())
	}
	f.mustSync("ns/work")
	st = f.job("work").Status
	if c := findCondition(st.Conditions, batchv1.JobComplete); c == nil ||
		c.Reason != batchv1.JobReasonSuccessPolicy {
		t.Fatalf("conditions %+v lack Complete SuccessPolicy", st.Conditions)
	}
	if st.CompletedIndexes != "0" || st.Succeeded != 1 || st.Failed != 0 {
		t.Errorf("status %+v", st)
	}
}

// TestOrphanFinalizerRemoved: a pod with the tracking finalizer whose Job
// is gone, or finished, loses it; one of a running Job keeps it.
func TestOrphanFinalizerRemoved(t *testing.T) {
	live := newJob("live", started)
	done := newJob("done", started, func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue},
		}
	})
	gone := newJob("gone")
	f := newFixture(t, objects(live, done,
		newPod("of-live", live), newPod("of-done", done), newPod("of-gone", gone),
		newPod("orphan", gone, func(p *corev1.Pod) { p.OwnerReferences = nil })))
	for _, name := range []string{"of-live", "of-done", "of-gone", "orphan"} {
		if err := f.c.syncOrphan(f.t.Context(), "pod/ns/"+name); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range f.apiPods() {
		keeps := len(p.Finalizers) > 0
		if keeps != (p.Name == "of-live") {
			t.Errorf("pod %s finalizers %v", p.Name, p.Finalizers)
		}
	}
}

// TestAdoptionAddsFinalizer: an orphan matching the selector is adopted
// with the tracking finalizer in the same patch, and counted.
func TestAdoptionAddsFinalizer(t *testing.T) {
	j := newJob("work", started, completions(1))
	orphan := newPod(
		"stray",
		j,
		withoutFinalizer,
		running,
		func(p *corev1.Pod) { p.OwnerReferences = nil },
	)
	f := newFixture(t, objects(j, orphan))
	if err := f.sync("ns/work"); err != nil {
		t.Fatal(err)
	}
	p := f.apiPods()[0]
	if !metav1.IsControlledBy(&p, j) ||
		!slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
		t.Errorf("pod %+v not adopted with the finalizer", p.ObjectMeta)
	}
	if len(f.createdPods()) != 0 || f.job("work").Status.Active != 1 {
		t.Errorf(
			"created %d pods, active %d: the adoptee should count",
			len(f.createdPods()),
			f.job("work").Status.Active,
		)
	}
}

func TestWithFinalizerChange(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"metadata":{"ownerReferences":[{"uid":"o"}],"uid":"d"}}`, `{"metadata":{"finalizers":["batch.kubernetes.io/job-tracking"],"ownerReferences":[{"uid":"o"}],"uid":"d"}}`},
		{`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"o"}],"uid":"d"}}`, `{"metadata":{"$deleteFromPrimitiveList/finalizers":["batch.kubernetes.io/job-tracking"],"ownerReferences":[{"$patch":"delete","uid":"o"}],"uid":"d"}}`},
	} {
		got, err := withFinalizerChange([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("withFinalizerChange(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if _, err := withFinalizerChange([]byte(`{}`)); err == nil ||
		!strings.Contains(err.Error(), "no metadata") {
		t.Errorf("a patch without metadata: %v", err)
	}
}

var _ runtime.Object = (*batchv1.Job)(nil)

// TestPodReplacementPolicy: a pod being deleted before it finished counts
// as failed at once with TerminatingOrFailed (its finalizer removed, its
// replacement after the back-off); with Failed it is only reported
// terminating and nothing replaces it until it has failed.
func TestPodReplacementPolicy(t *testing.T) {
	tests := []struct {
		policy          batchv1.PodReplacementPolicy
		wantFailed      int32
		wantTerminating int32
		wantPatches     int
		wantRequeue     bool
	}{
		{batchv1.TerminatingOrFailed, 1, 1, 1, true},
		{batchv1.Failed, 0, 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			j := newJob(
				"work",
				started,
				completions(1),
				func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(tt.policy) },
			)
			deleting := newPod(
				"p",
				j,
				running,
				func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(epochTime()) },
			)
			f := newFixture(t, objects(j, deleting))
			if err := f.sync("ns/work"); err != nil {
				t.Fatal(err)
			}
			st := f.job("work").Status
			if st.Failed != tt.wantFailed || ptr.Deref(st.Terminating, -1) != tt.wantTerminating ||
				st.Active != 0 {
				t.Errorf(
					"failed %d terminating %v active %d, want %d %d 0",
					st.Failed,
					ptr.Deref(st.Terminating, -1),
					st.Active,
					tt.wantFailed,
					tt.wantTerminating,
				)
			}
			if n := f.count("patch pods"); n != tt.wantPatches {
				t.Errorf("%d finalizer removals, want %d", n, tt.wantPatches)
			}
			if len(f.createdPods()) != 0 {
				t.Errorf("created %d pods, want none yet", len(f.createdPods()))
			}
			if d, ok := f.lastRequeue(); ok != tt.wantRequeue || ok && d != podFailureBackoffBase {
				t.Errorf("requeue %v %v, want %v", d, ok, tt.wantRequeue)
			}
		})
	}
}
