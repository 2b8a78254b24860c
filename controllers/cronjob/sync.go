package cronjob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// sync reconciles one CronJob: it deletes finished Jobs beyond the history
// limits, reconciles status.active with the Jobs it controls, starts the
// Job due now, writes the status once if anything changed, and requeues
// the key for the next schedule time.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	cached, err := c.cronJobLister.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	jobs, err := c.ownedJobs(cached)
	if err != nil {
		return err
	}
	cj := cached.DeepCopy()
	changed := c.cleanUp(ctx, cj, jobs)
	after, synced, syncErr := c.reconcile(ctx, cj, jobs)
	if syncErr != nil {
		c.log.V(2).Info("Error reconciling CronJob", "cronjob", key, "err", syncErr.Error())
	}
	if changed || synced {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj,
			metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("cronjob %s: updating status: %w", key, err)
		}
	}
	if after != nil {
		return workloop.RequeueAfter(*after)
	}
	return syncErr
}

// ownedJobs returns the cached Jobs whose controller is cj.
func (c *controller) ownedJobs(cj *batchv1.CronJob) ([]*batchv1.Job, error) {
	objs, err := c.jobIndexer.ByIndex(index.ByControllerUID, string(cj.UID))
	if err != nil {
		return nil, err
	}
	jobs := make([]*batchv1.Job, 0, len(objs))
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// finished returns the type of j's Complete or Failed condition that is
// true, or "".
func finished(j *batchv1.Job) batchv1.JobConditionType {
	for _, cond := range j.Status.Conditions {
		if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) &&
			cond.Status == corev1.ConditionTrue {
			return cond.Type
		}
	}
	return ""
}

func succeeded(j *batchv1.Job) bool {
	for _, cond := range j.Status.Conditions {
		if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// reconcile brings cj's status in line with its Jobs and starts the Job
// due now. It returns when to sync again (nil: only on a change), whether
// the status changed, and an error to retry on.
func (c *controller) reconcile(
	ctx context.Context,
	cj *batchv1.CronJob,
	jobs []*batchv1.Job,
) (*time.Duration, bool, error) {
	now := c.clock.Now()
	changed := false
	seen := make(map[types.UID]bool, len(jobs))
	for _, j := range jobs {
		seen[j.UID] = true
		listed := isActive(cj, j.UID)
		done := finished(j)
		switch {
		case !listed && done == "":
			// The status in the cache may be older than the Job: ask the
			// API server before calling the Job unexpected.
			fresh, err := c.client.BatchV1().
				CronJobs(cj.Namespace).
				Get(ctx, cj.Name, metav1.GetOptions{})
			if err != nil {
				return nil, changed, err
			}
			if isActive(fresh, j.UID) {
				// As in KCM, the rest of this sync decides on the fresh
				// copy, while the status sync writes is the caller's: a
				// change made from here on is written by the next sync
				// (after this write's conflict), not lost.
				cj = fresh
				continue
			}
			c.recorder.Eventf(
				cj,
				corev1.EventTypeWarning,
				"UnexpectedJob",
				"Saw a job that the controller did not create or forgot: %s",
				j.Name,
			)
		case done != "":
			if listed {
				removeActive(cj, j.UID)
				c.recorder.Eventf(
					cj,
					corev1.EventTypeNormal,
					"SawCompletedJob",
					"Saw completed job: %s, condition: %v",
					j.Name,
					done,
				)
				changed = true
			}
			if succeeded(j) {
				last := cj.Status.LastSuccessfulTime
				if last == nil ||
					j.Status.CompletionTime != nil && j.Status.CompletionTime.After(last.Time) {
					cj.Status.LastSuccessfulTime = j.Status.CompletionTime
					changed = true
				}
			}
		}
	}
	// A listed Job the cache lacks may be new: only one the API server does
	// not have either is dropped.
	for _, ref := range slices.Clone(cj.Status.Active) {
		if seen[ref.UID] {
			continue
		}
		_, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.recorder.Eventf(
				cj,
				corev1.EventTypeNormal,
				"MissingJob",
				"Active job went missing: %v",
				ref.Name,
			)
			removeActive(cj, ref.UID)
			changed = true
		case err != nil:
			return nil, changed, err
		}
	}
	if cj.DeletionTimestamp != nil {
		return nil, changed, nil
	}
	if cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			c.recorder.Eventf(
				cj,
				corev1.EventTypeWarning,
				"UnknownTimeZone",
				"invalid timeZone: %q: %s",
				*cj.Spec.TimeZone,
				err,
			)
			return nil, changed, nil
		}
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return nil, changed, nil
	}
	sched, err := parseSchedule(scheduleSpec(cj, c.recorder))
	if err != nil {
		c.recorder.Eventf(
			cj,
			corev1.EventTypeWarning,
			"UnparseableSchedule",
			"unparseable schedule: %q : %s",
			cj.Spec.Schedule,
			err,
		)
		return nil, changed, nil
	}
	due, err := dueTime(cj, now, sched, c.recorder)
	if err != nil {
		c.recorder.Eventf(
			cj,
			corev1.EventTypeWarning,
			"InvalidSchedule",
			"invalid schedule: %s : %s",
			cj.Spec.Schedule,
			err,
		)
		return nil, changed, nil
	}
	next := func() *time.Duration { d := untilNext(cj, now, sched); return &d }
	if due == nil {
		return next(), changed, nil
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil &&
		due.Add(time.Duration(*d)*time.Second).Before(now) {
		c.recorder.Eventf(
			cj,
			corev1.EventTypeWarning,
			"MissSchedule",
			"Missed scheduled time to start a job: %s",
			due.UTC().Format(time.RFC1123Z),
		)
		return next(), changed, nil
	}
	name := jobName(cj, *due)
	if isActiveByName(cj, cj.Namespace, name) ||
		cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(*due) {
		return next(), changed, nil
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0 {
		c.recorder.Eventf(
			cj,
			corev1.EventTypeNormal,
			"JobAlreadyActive",
			"Not starting job because prior execution is running and concurrency policy is Forbid",
		)
		return next(), changed, nil
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent {
		for _, ref := range slices.Clone(cj.Status.Active) {
			j, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return nil, changed, err
			}
			if !c.deleteJob(ctx, cj, j) {
				return nil, changed, fmt.Errorf("could not replace job %s/%s", j.Namespace, j.Name)
			}
			changed = true
		}
	}
	want, err := jobFor(cj, *due)
	if err != nil {
		return nil, changed, err
	}
	created, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, want, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, changed, err
	case apierrors.IsAlreadyExists(err):
		// Created before, by this controller when a status write failed
		// after it, or by someone else (who keeps the status then).
		existing, err := c.client.BatchV1().
			Jobs(cj.Namespace).
			Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return nil, changed, err
		}
		if !metav1.IsControlledBy(existing, cj) || isActive(cj, existing.UID) {
			return nil, changed, nil
		}
		created = existing
		c.log.Info("Job already exists", "cronjob", cj.Namespace+"/"+cj.Name, "job", want.Name)
	case err != nil:
		c.recorder.Eventf(
			cj,
			corev1.EventTypeWarning,
			"FailedCreate",
			"Error creating job: %v",
			err,
		)
		return nil, changed, err
	default:
		c.recorder.Eventf(
			cj,
			corev1.EventTypeNormal,
			"SuccessfulCreate",
			"Created job %v",
			created.Name,
		)
	}
	cj.Status.Active = append(cj.Status.Active, jobRef(created))
	cj.Status.LastScheduleTime = &metav1.Time{Time: *due}
	return next(), true, nil
}

// jobRef is the reference status.active holds for j.
func jobRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind:            "Job",
		APIVersion:      batchv1.SchemeGroupVersion.String(),
		Namespace:       j.Namespace,
		Name:            j.Name,
		UID:             j.UID,
		ResourceVersion: j.ResourceVersion,
	}
}

func isActive(cj *batchv1.CronJob, uid types.UID) bool {
	return slices.ContainsFunc(
		cj.Status.Active,
		func(r corev1.ObjectReference) bool { return r.UID == uid },
	)
}

func isActiveByName(cj *batchv1.CronJob, namespace, name string) bool {
	return slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool {
		return r.Name == name && r.Namespace == namespace
	})
}

// removeActive drops the Job with uid from status.active (which ends up
// an empty list, not nil, as in KCM).
func removeActive(cj *batchv1.CronJob, uid types.UID) {
	kept := []corev1.ObjectReference{}
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			kept = append(kept, r)
		}
	}
	cj.Status.Active = kept
}

// jobName is "<cronjob>-<scheduled time in minutes since the epoch>": one
// name per schedule time, so a Job is never started twice for it.
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// jobFor is the Job cj starts for the scheduled time: the template's spec,
// labels and annotations, the scheduled-timestamp annotation (RFC 3339 in
// the CronJob's time zone) and cj as controller.
func jobFor(cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	tz := ""
	if cj.Spec.TimeZone != nil {
		tz = *cj.Spec.TimeZone
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("cronjob %s/%s: spec.timeZone: %w", cj.Namespace, cj.Name, err)
	}
	labels := make(map[string]string, len(cj.Spec.JobTemplate.Labels))
	for k, v := range cj.Spec.JobTemplate.Labels {
		labels[k] = v
	}
	annotations := make(map[string]string, len(cj.Spec.JobTemplate.Annotations)+1)
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).
		Format(time.RFC3339)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(cj, scheduled),
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, cronJobKind)},
		},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&j.Spec)
	return j, nil
}

// cleanUp deletes cj's oldest finished Jobs beyond
// spec.successfulJobsHistoryLimit and spec.failedJobsHistoryLimit. It
// reports whether it deleted any (and so changed status.active).
func (c *controller) cleanUp(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	if cj.Spec.SuccessfulJobsHistoryLimit == nil && cj.Spec.FailedJobsHistoryLimit == nil {
		return false
	}
	var complete, failed []*batchv1.Job
	for _, j := range jobs {
		switch finished(j) {
		case batchv1.JobComplete:
			complete = append(complete, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	changed := false
	if l := cj.Spec.SuccessfulJobsHistoryLimit; l != nil &&
		c.deleteOldest(ctx, cj, complete, int(*l)) {
		changed = true
	}
	if l := cj.Spec.FailedJobsHistoryLimit; l != nil && c.deleteOldest(ctx, cj, failed, int(*l)) {
		changed = true
	}
	return changed
}

// deleteOldest deletes all but the keep newest of jobs, by start time (a
// Job not started counts as newest; names break ties).
func (c *controller) deleteOldest(
	ctx context.Context,
	cj *batchv1.CronJob,
	jobs []*batchv1.Job,
	keep int,
) bool {
	n := len(jobs) - keep
	if n <= 0 {
		return false
	}
	jobs = slices.Clone(jobs)
	slices.SortFunc(jobs, byStartTime)
	deleted := false
	for _, j := range jobs[:n] {
		if c.deleteJob(ctx, cj, j) {
			deleted = true
		}
	}
	return deleted
}

func byStartTime(a, b *batchv1.Job) int {
	switch sa, sb := a.Status.StartTime, b.Status.StartTime; {
	case sa == nil && sb != nil:
		return 1
	case sa != nil && sb == nil:
		return -1
	case sa.Equal(sb):
		return strings.Compare(a.Name, b.Name)
	case sa.Before(sb):
		return -1
	default:
		return 1
	}
}

// deleteJob deletes j with background propagation and drops it from
// status.active, recording the outcome on cj.
func (c *controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, j *batchv1.Job) bool {
	background := metav1.DeletePropagationBackground
	if err := c.client.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name,
		metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		c.log.Error(
			err,
			"Deleting a Job of a CronJob",
			"cronjob",
			cj.Namespace+"/"+cj.Name,
			"job",
			j.Name,
		)
		return false
	}
	removeActive(cj, j.UID)
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", j.Name)
	return true
}
