//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/cronjob"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// cronJobTimeout bounds each side of a CronJob scenario: a scenario that
// waits for a schedule time waits up to a minute for it.
const cronJobTimeout = 3 * time.Minute

func compareCronJob(t *testing.T, sc differential.Scenario) differential.Result {
	t.Helper()
	r := runner(t, env(t))
	r.Timeout = cronJobTimeout
	start := time.Now()
	res, err := r.Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	return res
}

// cronJobTemplate is a Job template whose pod runs one pause container.
func cronJobTemplate() batchv1.JobTemplateSpec {
	return batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "cron"}, Annotations: map[string]string{"note": "from-template"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		}}},
	}
}

// newCronJob returns a CronJob named name on schedule, changed by mods.
func newCronJob(name, schedule string, mods ...func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1.CronJobSpec{Schedule: schedule, JobTemplate: cronJobTemplate()},
	}
	for _, m := range mods {
		m(cj)
	}
	return cj
}

// cronOwnedJob creates a Job named name controlled by cj, with status st (nil:
// none, an unfinished Job).
func cronOwnedJob(ctx context.Context, cs kubernetes.Interface, cj *batchv1.CronJob, name string, st *batchv1.JobStatus) (*batchv1.Job, error) {
	tmpl := cronJobTemplate()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: tmpl.Spec,
	}
	j, err := cs.BatchV1().Jobs(cj.Namespace).Create(ctx, j, metav1.CreateOptions{})
	if err != nil || st == nil {
		return j, err
	}
	j.Status = *st
	return cs.BatchV1().Jobs(cj.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{})
}

func cronCompleteStatus(start, done time.Time) *batchv1.JobStatus {
	s, d := metav1.NewTime(start), metav1.NewTime(done)
	return &batchv1.JobStatus{
		StartTime: &s, CompletionTime: &d, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: d},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: d},
		},
	}
}

func cronFailedStatus(start, done time.Time) *batchv1.JobStatus {
	s, d := metav1.NewTime(start), metav1.NewTime(done)
	return &batchv1.JobStatus{
		StartTime: &s, Failed: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: d},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: d},
		},
	}
}

func createCronJob(ctx context.Context, cs kubernetes.Interface, ns string, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	return cs.BatchV1().CronJobs(ns).Create(ctx, cj.DeepCopy(), metav1.CreateOptions{})
}

// cronSetActive sets cj's status.active to refs.
func cronSetActive(ctx context.Context, cs kubernetes.Interface, cj *batchv1.CronJob, refs ...corev1.ObjectReference) error {
	cj = cj.DeepCopy()
	cj.Status.Active = refs
	_, err := cs.BatchV1().CronJobs(cj.Namespace).UpdateStatus(ctx, cj, metav1.UpdateOptions{})
	return err
}

func cronJobRef(ns, name string, uid types.UID) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: ns, Name: name, UID: uid}
}

// cronScheduledName matches the Job names a CronJob makes.
var cronScheduledName = regexp.MustCompile(`^(.+)-(\d+)$`)

// observeCronJobs returns the namespace's CronJobs and Jobs and a summary
// of its events: the sorted, distinct "<kind> <name> <reason>" triples
// (counts and timing of events are not deterministic), without the
// stale-cache events staleCacheEvent names. Normalised here:
//   - a Job's name "<cronjob>-<number>" becomes "<cronjob>-<minutes>" when
//     the number is its scheduled-timestamp annotation's time in minutes
//     since the epoch (the sides run in different minutes), everywhere the
//     name appears (labels, status.active); a wrong number stays and
//     differs;
//   - the scheduled-timestamp annotation keeps only its zone offset (the
//     time differs by run; the offset shows the CronJob's time zone);
//   - status.active[].resourceVersion goes (the API server's counter);
//   - status.lastSuccessfulTime becomes an annotation naming the Job whose
//     completion time it is, from completions (Setup's Jobs by namespace).
func observeCronJobs(completions *sync.Map) func(context.Context, kubernetes.Interface, string) ([]runtime.Object, error) {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
		cjs, err := cs.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		renames := map[string]string{}
		var out []runtime.Object
		for i := range jobs.Items {
			j := &jobs.Items[i]
			j.Kind = "Job"
			out = append(out, j)
			ts, ok := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]
			if !ok {
				continue
			}
			at, err := time.Parse(time.RFC3339, ts)
			if err != nil {
				continue
			}
			j.Annotations[batchv1.CronJobScheduledTimestampAnnotation] = "<time>" + at.Format("Z07:00")
			m := cronScheduledName.FindStringSubmatch(j.Name)
			if m == nil || m[2] != strconv.FormatInt(at.Unix()/60, 10) {
				continue
			}
			n := m[1] + "-<minutes>"
			renames[j.Name] = n
			for _, labels := range []map[string]string{j.Labels, j.Spec.Template.Labels} {
				for k, v := range labels {
					if v == j.Name {
						labels[k] = n
					}
				}
			}
			j.Name = n
		}
		var byTime map[string]string
		if v, ok := completions.Load(ns); ok {
			byTime = v.(map[string]string)
		}
		for i := range cjs.Items {
			cj := &cjs.Items[i]
			cj.Kind = "CronJob"
			for k := range cj.Status.Active {
				a := &cj.Status.Active[k]
				a.ResourceVersion = ""
				if n, ok := renames[a.Name]; ok {
					a.Name = n
				}
			}
			if t := cj.Status.LastSuccessfulTime; t != nil {
				if cj.Annotations == nil {
					cj.Annotations = map[string]string{}
				}
				cj.Annotations["test/last-successful-job"] = byTime[t.UTC().Format(time.RFC3339)]
				cj.Status.LastSuccessfulTime = nil
			}
			out = append(out, cj)
		}
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var reasons []string
		for _, e := range evs.Items {
			if staleCacheEvent(e) {
				continue
			}
			reasons = append(reasons, e.InvolvedObject.Kind+" "+e.InvolvedObject.Name+" "+e.Reason)
		}
		slices.Sort(reasons)
		summary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "events"},
			Data: map[string]string{"reasons": strings.Join(slices.Compact(reasons), "\n")}}
		summary.Kind = "Summary"
		return append(out, summary), nil
	}
}

// staleCacheEvent reports a FailedDelete or FailedGet of a Job that is
// not found: a sync that ran on a cache which had not yet shown its own
// earlier deletion (or status write) tries again and records it. Both
// implementations do (KCM has the same race); whether it happens is timing.
func staleCacheEvent(e corev1.Event) bool {
	return (e.Reason == "FailedDelete" || e.Reason == "FailedGet") && strings.Contains(e.Message, "not found")
}

// cronHasAll is a Settled predicate: the rendered state holds every one of
// want.
func cronHasAll(want ...string) func([]map[string]any) bool {
	return func(state []map[string]any) bool {
		s := fmt.Sprint(state)
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}
}

// TestCronJobReconcile: CronJobs whose schedules do not come during the
// run, each reconciling its status with its Jobs at once:
//   - "history" (successfulJobsHistoryLimit 1, failedJobsHistoryLimit 1)
//     with three Complete and two Failed Jobs: the two oldest-started
//     Complete and the oldest Failed are deleted (SuccessfulDelete), and
//     lastSuccessfulTime is the latest completion among all five, that of a
//     Job just deleted;
//   - "unexpected" with an unfinished Job it controls that status.active
//     does not list: UnexpectedJob, not adopted into status.active;
//   - "done" listing a Complete Job: SawCompletedJob, the list emptied,
//     lastSuccessfulTime its completion;
//   - "missing" listing a Job that does not exist, and "suspended" (every
//     minute, suspended) doing the same: MissingJob for both, no Job made;
//   - "never" ("0 0 31 2 *", a date that never comes): InvalidSchedule.
//
// Compared: every CronJob (status.active, the annotation standing for
// lastSuccessfulTime), every Job (count, names, owner references, status)
// and the event summary.
func TestCronJobReconcile(t *testing.T) {
	completions := &sync.Map{}
	yearly := "0 0 1 1 *"
	compareCronJob(t, differential.Scenario{
		Name: "cronjob reconciles status and history", Controller: cronjob.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			now := time.Now().UTC().Truncate(time.Second)
			byTime := map[string]string{}
			ago := func(d time.Duration) time.Time { return now.Add(-d) }
			hist, err := createCronJob(ctx, cs, ns, newCronJob("history", yearly, func(cj *batchv1.CronJob) {
				cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
				cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
			}))
			if err != nil {
				return err
			}
			for _, j := range []struct {
				name        string
				start, done time.Duration
				ok          bool
			}{
				{"history-ok-1", 3 * time.Hour, 10 * time.Minute, true},
				{"history-ok-2", 2 * time.Hour, 90 * time.Minute, true},
				{"history-ok-3", time.Hour, 50 * time.Minute, true},
				{"history-failed-1", 3 * time.Hour, 2 * time.Hour, false},
				{"history-failed-2", time.Hour, 30 * time.Minute, false},
			} {
				st := cronFailedStatus(ago(j.start), ago(j.done))
				if j.ok {
					st = cronCompleteStatus(ago(j.start), ago(j.done))
					byTime[ago(j.done).Format(time.RFC3339)] = j.name
				}
				if _, err := cronOwnedJob(ctx, cs, hist, j.name, st); err != nil {
					return fmt.Errorf("job %s: %w", j.name, err)
				}
			}
			unexpected, err := createCronJob(ctx, cs, ns, newCronJob("unexpected", yearly))
			if err != nil {
				return err
			}
			if _, err := cronOwnedJob(ctx, cs, unexpected, "unexpected-running", nil); err != nil {
				return err
			}
			done, err := createCronJob(ctx, cs, ns, newCronJob("done", yearly))
			if err != nil {
				return err
			}
			dj, err := cronOwnedJob(ctx, cs, done, "done-job", cronCompleteStatus(ago(20*time.Minute), ago(5*time.Minute)))
			if err != nil {
				return err
			}
			byTime[ago(5*time.Minute).Format(time.RFC3339)] = "done-job"
			if err := cronSetActive(ctx, cs, done, cronJobRef(ns, dj.Name, dj.UID)); err != nil {
				return err
			}
			for i, cj := range []*batchv1.CronJob{
				newCronJob("missing", yearly),
				newCronJob("suspended", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) }),
			} {
				created, err := createCronJob(ctx, cs, ns, cj)
				if err != nil {
					return err
				}
				uid := types.UID(fmt.Sprintf("0b7f4e9e-3c1e-4f0a-9d51-%012d", i))
				if err := cronSetActive(ctx, cs, created, cronJobRef(ns, cj.Name+"-gone", uid)); err != nil {
					return err
				}
			}
			if _, err := createCronJob(ctx, cs, ns, newCronJob("never", "0 0 31 2 *")); err != nil {
				return err
			}
			completions.Store(ns, byTime)
			return nil
		},
		Observe: observeCronJobs(completions),
		Settled: cronHasAll(
			"CronJob history SuccessfulDelete", "CronJob unexpected UnexpectedJob", "CronJob done SawCompletedJob",
			"CronJob missing MissingJob", "CronJob suspended MissingJob", "CronJob never InvalidSchedule",
			"last-successful-job:history-ok-1", "last-successful-job:done-job",
		),
	})
}

// TestCronJobFiring waits for one schedule time ("*/1 * * * *", the next
// minute) of four CronJobs in one namespace:
//   - "allow" (time zone Asia/Kolkata, +05:30) starts Job
//     "allow-<minutes>" with the template's labels and annotations, the
//     scheduled-timestamp annotation in +05:30 and the CronJob as
//     controller; status.active lists it and lastScheduleTime is set;
//   - "forbid" (Forbid) listing a running Job it controls starts nothing
//     (JobAlreadyActive);
//   - "replace" (Replace) listing a running Job deletes it
//     (SuccessfulDelete) and starts its own;
//   - "suspended" starts nothing.
//
// Compared: the CronJobs' status.active and lastScheduleTime (present or
// not), the Jobs (count, normalised names, labels, annotations, owner
// references) and the event summary.
func TestCronJobFiring(t *testing.T) {
	every := "*/1 * * * *"
	compareCronJob(t, differential.Scenario{
		Name: "cronjob starts the jobs due", Controller: cronjob.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := createCronJob(ctx, cs, ns, newCronJob("allow", every, func(cj *batchv1.CronJob) {
				cj.Spec.TimeZone = ptr.To("Asia/Kolkata")
			})); err != nil {
				return err
			}
			for _, p := range []batchv1.ConcurrencyPolicy{batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent} {
				name := strings.ToLower(string(p))
				cj, err := createCronJob(ctx, cs, ns, newCronJob(name, every, func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = p }))
				if err != nil {
					return err
				}
				j, err := cronOwnedJob(ctx, cs, cj, name+"-old", nil)
				if err != nil {
					return err
				}
				if err := cronSetActive(ctx, cs, cj, cronJobRef(ns, j.Name, j.UID)); err != nil {
					return err
				}
			}
			_, err := createCronJob(ctx, cs, ns, newCronJob("suspended", every, func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) }))
			return err
		},
		Observe: observeCronJobs(&sync.Map{}),
		Settled: cronHasAll(
			"CronJob allow SuccessfulCreate", "CronJob forbid JobAlreadyActive",
			"CronJob replace SuccessfulDelete", "CronJob replace SuccessfulCreate",
			"allow-<minutes>", "replace-<minutes>",
		),
	})
}
