package cronjob

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestReconcile: one reconcile of a CronJob and its cached Jobs at a fake
// now: the Jobs created and deleted, the events, status.active,
// lastScheduleTime and lastSuccessfulTime, and the requeue.
func TestReconcile(t *testing.T) {
	created := at("2026-03-01T11:59:30Z")
	dueNow := at("2026-03-01T12:00:00Z")
	running := func(name string) *batchv1.Job { return job(cronJob("", created), name) }
	tests := []struct {
		name        string
		cj          *batchv1.CronJob
		jobs        []*batchv1.Job // cached and in the API server
		apiOnly     []runtime.Object
		apiCronJob  func(*batchv1.CronJob) // changes the API server's copy only
		react       func(*fixtureReactors)
		wantActions []string
		wantReasons []string
		wantActive  []string
		wantLast    *time.Time // lastScheduleTime
		wantSuccess *time.Time // lastSuccessfulTime
		wantChanged bool
		wantRequeue time.Duration // 0: none
		wantErr     bool
	}{
		{
			name: "allow: the due Job is started", cj: cronJob("* * * * *", created),
			wantActions: []string{"create jobs"}, wantReasons: []string{"SuccessfulCreate"},
			wantActive: []string{
				"cj-29539440",
			}, wantLast: &dueNow, wantChanged: true, wantRequeue: 30*time.Second + requeueSlack,
		},
		{
			name: "allow: a second Job beside an active one", cj: cronJob("* * * * *", created, active(running("old"))), jobs: []*batchv1.Job{running("old")},
			wantActions: []string{"create jobs"}, wantReasons: []string{"SuccessfulCreate"},
			wantActive: []string{
				"old",
				"cj-29539440",
			}, wantLast: &dueNow, wantChanged: true, wantRequeue: 30*time.Second + requeueSlack,
		},
		{
			name: "not due yet", cj: cronJob("30 * * * *", created),
			wantRequeue: 29*time.Minute + 30*time.Second + requeueSlack,
		},
		{
			name: "this time already started", cj: cronJob("* * * * *", created, lastScheduled(dueNow)),
			wantLast: &dueNow, wantRequeue: 30*time.Second + requeueSlack,
		},
		{
			name: "forbid: an active Job holds the start",
			cj: cronJob(
				"* * * * *",
				created,
				active(running("old")),
				func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent },
			),
			jobs: []*batchv1.Job{running("old")}, wantReasons: []string{"JobAlreadyActive"},
			wantActive: []string{"old"}, wantRequeue: 30*time.Second + requeueSlack,
		},
		{
			name: "forbid: starts when nothing is active",
			cj: cronJob(
				"* * * * *",
				created,
				func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent },
			),
			wantActions: []string{"create jobs"}, wantReasons: []string{"SuccessfulCreate"},
			wantActive: []string{
				"cj-29539440",
			}, wantLast: &dueNow, wantChanged: true, wantRequeue: 30*time.Second + requeueSlack,
		},
		{
			name: "replace: the active Job is deleted, then the new one started",
			cj: cronJob(
				"* * * * *",
				created,
				active(running("old")),
				func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent },
			),
			jobs: []*batchv1.Job{
				running("old"),
			}, wantActions: []string{"get jobs", "delete jobs", "create jobs"},
			wantReasons: []string{"SuccessfulDelete", "SuccessfulCreate"},
			wantActive: []string{
				"cj-29539440",
			}, wantLast: &dueNow, wantChanged: true, wantRequeue: 30*time.Second + requeueSlack,
		},
		{
			name: "suspended: nothing started, no requeue",
			cj: cronJob(
				"* * * * *",
				created,
				func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) },
			),
		},
		{
			name: "a finished listed Job leaves status.active; a Complete one sets lastSuccessfulTime",
			cj:   cronJob("30 * * * *", created, active(running("done"))),
			jobs: []*batchv1.Job{
				job(
					cronJob("", created),
					"done",
					completedAt(created, created.Add(10*time.Second)),
				),
			},
			wantReasons: []string{"SawCompletedJob"}, wantActive: []string{},
			wantSuccess: ptr.To(
				created.Add(10 * time.Second),
			), wantChanged: true, wantRequeue: 29*time.Minute + 30*time.Second + requeueSlack,
		},
		{
			name: "the latest completion wins, listed or not",
			cj: cronJob("30 * * * *", created, func(cj *batchv1.CronJob) {
				cj.Status.LastSuccessfulTime = &metav1.Time{Time: created.Add(-time.Hour)}
			}),
			jobs: []*batchv1.Job{
				job(
					cronJob("", created),
					"a",
					completedAt(created.Add(-2*time.Hour), created.Add(-time.Minute)),
				),
				job(
					cronJob("", created),
					"b",
					completedAt(created.Add(-2*time.Hour), created.Add(-3*time.Hour)),
				),
			},
			wantSuccess: ptr.To(
				created.Add(-time.Minute),
			), wantChanged: true, wantRequeue: 29*time.Minute + 30*time.Second + requeueSlack,
		},
		{
			name: "a failed listed Job leaves status.active without lastSuccessfulTime",
			cj:   cronJob("30 * * * *", created, active(running("bad"))),
			jobs: []*batchv1.Job{job(cronJob("", created), "bad", failedAt(created))},
			wantReasons: []string{
				"SawCompletedJob",
			}, wantActive: []string{}, wantChanged: true, wantRequeue: 29*time.Minute + 30*time.Second + requeueSlack,
		},
		{
			name: "a listed Job gone from the API server is dropped",
			cj:   cronJob("30 * * * *", created, active(running("gone"))),
			wantActions: []string{
				"get jobs",
			}, wantReasons: []string{"MissingJob"}, wantActive: []string{},
			wantChanged: true, wantRequeue: 29*time.Minute + 30*time.Second + requeueSlack,
		},
		{
			name: "a listed Job the cache lacks but the API server has stays",
			cj: cronJob(
				"30 * * * *",
				created,
				active(running("new")),
			), apiOnly: []runtime.Object{running("new")},
			wantActions: []string{
				"get jobs",
			}, wantActive: []string{"new"}, wantRequeue: 29*time.Minute + 30*time.Second + requeueSlack,
		},
		{
			name: "an unlisted running Job is reported, not adopted",
			cj:   cronJob("30 * * * *", created), jobs: []*batchv1.Job{running("stray")},
			wantActions: []string{"get cronjobs"}, wantReasons: []string{"UnexpectedJob"},
			wantRequeue: 29*time.Minute + 30*time.Second + requeueSlack,
		},
		{
			name: "an unknown time zone stops scheduling",
			cj: cronJob(
				"* * * * *",
				created,
				func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr.To("Mars/Olympus") },
			),
			wantReasons: []string{"UnknownTimeZone"},
		},
		{
			name:        "an unparseable schedule stops scheduling",
			cj:          cronJob("every minute", created),
			wantReasons: []string{"UnparseableSchedule"},
		},
		{
			name:        "a schedule that never comes is invalid",
			cj:          cronJob("0 0 31 2 *", created),
			wantReasons: []string{"InvalidSchedule"},
		},
		{
			name: "more than 100 missed: warned, the latest started",
			cj:   cronJob("* * * * *", created.Add(-3*time.Hour)),
			wantActions: []string{
				"create jobs",
			}, wantReasons: []string{"TooManyMissedTimes", "SuccessfulCreate"},
			wantActive: []string{
				"cj-29539440",
			}, wantLast: &dueNow, wantChanged: true, wantRequeue: 30*time.Second + requeueSlack,
		},
		{
			name: "the Job exists already, ours and unlisted: listed now",
			cj:   cronJob("* * * * *", created), apiOnly: []runtime.Object{running("cj-29539440")},
			wantActions: []string{"create jobs", "get jobs"}, wantActive: []string{"cj-29539440"},
			wantLast: &dueNow, wantChanged: true, wantRequeue: 30*time.Second + requeueSlack,
		},
		{
			name: "the Job exists already, someone else's: left alone",
			cj:   cronJob("* * * * *", created),
			apiOnly: []runtime.Object{
				&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cj-29539440"}},
			},
			wantActions: []string{"create jobs", "get jobs"},
		},
		{
			name: "a failed create is reported and retried",
			cj:   cronJob("* * * * *", created),
			react: func(r *fixtureReactors) {
				r.prepend(
					"create",
					"jobs",
					apierrors.NewForbidden(
						schema.GroupResource{Resource: "jobs"},
						"x",
						errors.New("quota"),
					),
				)
			},
			wantActions: []string{
				"create jobs",
			}, wantReasons: []string{"FailedCreate"}, wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{tt.cj}
			for _, j := range tt.jobs {
				objs = append(objs, j)
			}
			f := newFixture(t, epoch, objs...)
			for _, o := range tt.apiOnly {
				if err := f.client.Tracker().Add(o); err != nil {
					t.Fatal(err)
				}
			}
			if tt.apiCronJob != nil {
				api := tt.cj.DeepCopy()
				tt.apiCronJob(api)
				if err := f.client.Tracker().Update(batchv1.SchemeGroupVersion.WithResource("cronjobs"), api, api.Namespace); err != nil {
					t.Fatal(err)
				}
			}
			if tt.react != nil {
				tt.react(&fixtureReactors{f})
			}
			cj := tt.cj.DeepCopy()
			jobs, err := f.c.ownedJobs(cj)
			if err != nil {
				t.Fatal(err)
			}
			f.client.ClearActions()
			requeue, changed, err := f.c.reconcile(t.Context(), cj, jobs)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if got := f.actions(); !slices.Equal(got, tt.wantActions) {
				t.Errorf("actions %q, want %q", got, tt.wantActions)
			}
			if got := f.reasons(); !slices.Equal(got, tt.wantReasons) {
				t.Errorf("events %q, want %q", got, tt.wantReasons)
			}
			var names []string
			for _, r := range cj.Status.Active {
				names = append(names, r.Name)
			}
			if tt.wantActive == nil && len(names) > 0 ||
				tt.wantActive != nil && !slices.Equal(names, tt.wantActive) {
				t.Errorf("active %q, want %q", names, tt.wantActive)
			}
			if got := cj.Status.LastScheduleTime; !sameTime(got, tt.wantLast) {
				t.Errorf("lastScheduleTime %v, want %v", got, tt.wantLast)
			}
			if got := cj.Status.LastSuccessfulTime; !sameTime(got, tt.wantSuccess) &&
				(tt.wantSuccess != nil || !sameTime(got, timeOf(tt.cj.Status.LastSuccessfulTime))) {
				t.Errorf("lastSuccessfulTime %v, want %v", got, tt.wantSuccess)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed %v, want %v", changed, tt.wantChanged)
			}
			switch {
			case tt.wantRequeue == 0 && requeue != nil:
				t.Errorf("requeue in %v, want none", *requeue)
			case tt.wantRequeue != 0 && (requeue == nil || *requeue != tt.wantRequeue):
				t.Errorf("requeue %v, want in %v", requeue, tt.wantRequeue)
			}
		})
	}
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}

func sameTime(got *metav1.Time, want *time.Time) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return got.Time.Equal(*want)
}

type fixtureReactors struct{ f *fixture }

func (r *fixtureReactors) prepend(verb, resource string, err error) {
	r.f.client.PrependReactor(
		verb,
		resource,
		func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, err },
	)
}

// TestJobFromTemplate: the Job started carries the name, the template's
// labels, annotations and spec, the scheduled-timestamp annotation in the
// CronJob's time zone and the CronJob as controller.
func TestJobFromTemplate(t *testing.T) {
	for _, tt := range []struct {
		tz   *string
		want string
	}{
		{nil, "2026-03-01T12:00:00Z"},
		{ptr.To("UTC"), "2026-03-01T12:00:00Z"},
		{ptr.To("Asia/Kolkata"), "2026-03-01T17:30:00+05:30"},
		{ptr.To("America/New_York"), "2026-03-01T07:00:00-05:00"},
	} {
		t.Run(ptr.Deref(tt.tz, "none"), func(t *testing.T) {
			cj := cronJob(
				"* * * * *",
				at("2026-03-01T11:59:30Z"),
				func(cj *batchv1.CronJob) { cj.Spec.TimeZone = tt.tz },
			)
			f := newFixture(t, epoch, cj)
			if _, _, err := f.c.reconcile(t.Context(), cj.DeepCopy(), nil); err != nil {
				t.Fatal(err)
			}
			jobs := f.created()
			if len(jobs) != 1 {
				t.Fatalf("%d Jobs created, want 1", len(jobs))
			}
			j := jobs[0]
			if j.Name != "cj-29539440" {
				t.Errorf("name %q", j.Name)
			}
			if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != tt.want {
				t.Errorf("scheduled timestamp %q, want %q", got, tt.want)
			}
			if j.Annotations["a"] != "b" || j.Labels["app"] != "x" || len(j.Labels) != 1 ||
				len(j.Annotations) != 2 {
				t.Errorf("labels %v annotations %v", j.Labels, j.Annotations)
			}
			ref := metav1.GetControllerOf(j)
			if ref == nil || ref.Kind != "CronJob" || ref.APIVersion != "batch/v1" ||
				ref.Name != "cj" ||
				ref.UID != "cj-uid" ||
				!ptr.Deref(ref.BlockOwnerDeletion, false) {
				t.Errorf("controller %+v", ref)
			}
			if j.Spec.Template.Spec.Containers[0].Image != "i" {
				t.Errorf("spec not copied: %+v", j.Spec)
			}
		})
	}
}

// TestCleanUp: finished Jobs beyond the history limits go, oldest start
// first (a Job without a start time counts as newest); running Jobs and
// the other kind are kept; the deleted are dropped from status.active.
func TestCleanUp(t *testing.T) {
	base := at("2026-03-01T10:00:00Z")
	cj := cronJob("0 0 1 1 *", base.Add(-24*time.Hour), func(cj *batchv1.CronJob) {
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
		cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
	})
	ok := func(name string, start time.Duration) *batchv1.Job {
		return job(cj, name, completedAt(base.Add(start), base.Add(start+time.Minute)))
	}
	bad := func(name string, start time.Duration) *batchv1.Job { return job(cj, name, failedAt(base.Add(start))) }
	unstarted := job(cj, "bad-unstarted", func(j *batchv1.Job) {
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue},
		}
	})
	jobs := []*batchv1.Job{
		ok(
			"ok-3",
			3*time.Hour,
		), ok("ok-1", time.Hour), ok("ok-2", 2*time.Hour), ok("ok-2b", 2*time.Hour),
		bad("bad-1", time.Hour), unstarted, job(cj, "running"),
	}
	active(jobs[1])(cj)
	objs := []runtime.Object{cj}
	for _, j := range jobs {
		objs = append(objs, j)
	}
	f := newFixture(t, epoch, objs...)
	f.client.ClearActions()
	got := cj.DeepCopy()
	if !f.c.cleanUp(t.Context(), got, jobs) {
		t.Error("cleanUp reported no change")
	}
	var deleted []string
	for _, a := range f.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok {
			deleted = append(deleted, d.GetName())
			if p := d.GetDeleteOptions().PropagationPolicy; p == nil ||
				*p != metav1.DeletePropagationBackground {
				t.Errorf("delete %s with propagation %v, want Background", d.GetName(), p)
			}
		}
	}
	if want := []string{"ok-1", "ok-2", "ok-2b", "bad-1"}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %q, want %q", deleted, want)
	}
	if len(got.Status.Active) != 0 {
		t.Errorf("active %v, want the deleted ok-1 dropped", got.Status.Active)
	}
	if r := f.reasons(); len(r) != 4 || r[0] != "SuccessfulDelete" {
		t.Errorf("events %q", r)
	}

	// Without limits nothing is deleted.
	f.client.ClearActions()
	none := cj.DeepCopy()
	none.Spec.SuccessfulJobsHistoryLimit, none.Spec.FailedJobsHistoryLimit = nil, nil
	if f.c.cleanUp(t.Context(), none, jobs) || len(f.actions()) != 0 {
		t.Errorf("without limits: %q", f.actions())
	}
}

// TestSyncWritesStatusOnce: a sync that cleans up and starts a Job writes
// the status once, and asks to be requeued for the next schedule time.
func TestSyncWritesStatusOnce(t *testing.T) {
	cj := cronJob("* * * * *", at("2026-03-01T11:59:30Z"), func(cj *batchv1.CronJob) {
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
	})
	old := job(cj, "old", completedAt(at("2026-03-01T11:00:00Z"), at("2026-03-01T11:01:00Z")))
	f := newFixture(t, epoch, cj, old)
	f.client.ClearActions()
	err := f.c.sync(t.Context(), "ns/cj")
	if err == nil || !strings.Contains(err.Error(), "requeue after 30.1s") {
		t.Errorf("sync: %v, want a requeue after 30.1s", err)
	}
	if want := []string{"delete jobs", "create jobs", "update cronjobs/status"}; !slices.Equal(
		f.actions(),
		want,
	) {
		t.Errorf("actions %q, want %q", f.actions(), want)
	}
	got, gerr := f.client.BatchV1().CronJobs("ns").Get(t.Context(), "cj", metav1.GetOptions{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if len(got.Status.Active) != 1 || got.Status.Active[0].Name != "cj-29539440" ||
		got.Status.Active[0].Kind != "Job" ||
		got.Status.LastScheduleTime == nil ||
		got.Status.LastSuccessfulTime == nil {
		t.Errorf("status %+v", got.Status)
	}

	// A gone CronJob is nothing to do.
	if err := f.c.sync(t.Context(), "ns/other"); err != nil {
		t.Errorf("sync of a gone CronJob: %v", err)
	}
}

// TestSyncStatusWriteFails: a failed status write is an error to retry.
func TestSyncStatusWriteFails(t *testing.T) {
	cj := cronJob("* * * * *", at("2026-03-01T11:59:30Z"))
	f := newFixture(t, epoch, cj)
	(&fixtureReactors{f}).prepend(
		"update",
		"cronjobs",
		apierrors.NewConflict(
			schema.GroupResource{Resource: "cronjobs"},
			"cj",
			errors.New("changed"),
		),
	)
	if err := f.c.sync(t.Context(), "ns/cj"); err == nil ||
		!strings.Contains(err.Error(), "updating status") {
		t.Errorf("sync: %v, want the status write's error", err)
	}
}
