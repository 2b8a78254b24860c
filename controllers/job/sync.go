package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// Event reasons and condition reasons this package writes besides the
// batch/v1 constants and podcontrol's.
const (
	reasonCompleted             = "Completed"
	reasonSuspended             = "Suspended"
	reasonResumed               = "Resumed"
	reasonTooManySucceededPods  = "TooManySucceededPods"
	reasonUnknownCompletionMode = "UnknownCompletionMode"
	// Reasons of the Suspended condition.
	conditionReasonSuspended = "JobSuspended"
	conditionReasonResumed   = "JobResumed"
)

// API defaults, used when a Job (say, in a test) lacks the defaulted field.
const (
	defaultBackoffLimit = 6
	defaultParallelism  = 1
)

// uidSet is a set of pod UIDs.
type uidSet map[types.UID]struct{}

func newUIDSet(uids []types.UID) uidSet {
	s := make(uidSet, len(uids))
	for _, u := range uids {
		s[u] = struct{}{}
	}
	return s
}

func (s uidSet) has(u types.UID) bool { _, ok := s[u]; return ok }

// syncContext is what one sync of one Job works out and passes along.
type syncContext struct {
	job        *batchv1.Job // the sync's own copy
	pods       []*corev1.Pod
	activePods []*corev1.Pod
	// finished is the condition the Job is to end with, once evaluated.
	finished  *batchv1.JobCondition
	succeeded int32
	failed    int32
	// Indexed Jobs: the indexes counted before this sync, and with this
	// sync's new successes; failedIndexes with backoffLimitPerIndex.
	prevSucceededIndexes spans
	succeededIndexes     spans
	failedIndexes        *spans
	newBackoff           backoffRecord
	// expectedRemovals are pods whose finalizer this controller removed,
	// not yet observed: counted already.
	expectedRemovals   uidSet
	uncountedSucceeded uidSet
	uncountedFailed    uidSet
	delayedPerIndex    map[int]*corev1.Pod
	terminating        int32
	ready              int32
}

// uncountedPods returns the pods that hold the tracking finalizer, are not
// in skip nor expected to lose their finalizer and, for an Indexed Job,
// have a valid index: those whose outcome is not counted yet.
func (jc *syncContext) uncountedPods(skip uidSet) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range jc.pods {
		if !hasTrackingFinalizer(p) || skip.has(p.UID) || jc.expectedRemovals.has(p.UID) {
			continue
		}
		if isIndexed(jc.job) {
			if _, ok := validIndex(jc.job, p); !ok {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

func isFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) &&
			c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func isSuspended(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) }

// managedElsewhere: spec.managedBy names another controller (and the
// JobManagedBy gate is on).
func (c *controller) managedElsewhere(j *batchv1.Job) bool {
	return c.managedBy && j.Spec.ManagedBy != nil && *j.Spec.ManagedBy != batchv1.JobControllerName
}

func findCondition(list []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

func newCondition(
	t batchv1.JobConditionType,
	status corev1.ConditionStatus,
	reason, message string,
	now time.Time,
) *batchv1.JobCondition {
	return &batchv1.JobCondition{
		Type: t, Status: status, Reason: reason, Message: message,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	}
}

// ensureCondition sets the condition of type t to status, reason and
// message, replacing one that differs; a missing condition is added unless
// its status would be False. It reports whether list changed.
func ensureCondition(
	list []batchv1.JobCondition,
	t batchv1.JobConditionType,
	status corev1.ConditionStatus,
	reason, message string,
	now time.Time,
) ([]batchv1.JobCondition, bool) {
	if cur := findCondition(list, t); cur != nil {
		if cur.Status == status && cur.Reason == reason && cur.Message == message {
			return list, false
		}
		*cur = *newCondition(t, status, reason, message, now)
		return list, true
	}
	if status == corev1.ConditionFalse {
		return list, false
	}
	return append(list, *newCondition(t, status, reason, message, now)), true
}

// successCriteriaMet returns the Job's true SuccessCriteriaMet condition.
func successCriteriaMet(j *batchv1.Job) *batchv1.JobCondition {
	if c := findCondition(j.Status.Conditions, batchv1.JobSuccessCriteriaMet); c != nil &&
		c.Status == corev1.ConditionTrue {
		return c
	}
	return nil
}

func isSuccessCriteriaMet(c *batchv1.JobCondition) bool {
	return c != nil && c.Type == batchv1.JobSuccessCriteriaMet && c.Status == corev1.ConditionTrue
}

func (c *controller) failureTarget(reason, message string) *batchv1.JobCondition {
	return newCondition(
		batchv1.JobFailureTarget,
		corev1.ConditionTrue,
		reason,
		message,
		c.clock.Now(),
	)
}

// sync brings one Job's pods and status in line with its spec. It must not
// run concurrently for one key (the work queue ensures that).
func (c *controller) sync(ctx context.Context, key string) error {
	log := logFrom(ctx).WithValues("job", key)
	start := c.clock.Now()
	defer func() { log.V(4).Info("Finished syncing job", "elapsed", c.clock.Since(start)) }()

	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || ns == "" || name == "" {
		return workloop.Permanent(
			fmt.Errorf("invalid job key %q: either namespace or name is missing", key),
		)
	}
	shared, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		log.V(4).Info("Job has been deleted")
		c.exp.Delete(key)
		c.finalizerExp.forget(key)
		c.backoff.remove(key)
		return nil
	}
	if err != nil {
		return err
	}
	// Checked here, not only in the handlers: a queued key may by now name
	// a Job created anew with managedBy set.
	if c.managedElsewhere(shared) {
		log.V(2).
			Info("Skip syncing the job as it is managed by an external controller", "uid", shared.UID,
				"controllerName", *shared.Spec.ManagedBy)
		return nil
	}
	job := shared.DeepCopy()
	if isFinished(job) {
		c.backoff.remove(key)
		c.finishedJobs.Delete(job.UID)
		return nil
	}
	if _, ok := c.finishedJobs.Load(job.UID); ok {
		log.V(2).
			Info("Skip syncing the job as it is marked finished but the update is not yet observed",
				"uid", job.UID)
		return nil
	}
	if m := job.Spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion &&
		*m != batchv1.IndexedCompletion {
		c.recorder.Event(
			job,
			corev1.EventTypeWarning,
			reasonUnknownCompletionMode,
			"Skipped Job sync because completion mode is unknown",
		)
		return nil
	}
	if job.Spec.BackoffLimit == nil {
		job.Spec.BackoffLimit = ptr.To[int32](defaultBackoffLimit)
	}
	if job.Spec.Parallelism == nil {
		job.Spec.Parallelism = ptr.To[int32](defaultParallelism)
	}
	if isIndexed(job) && job.Spec.Completions == nil {
		return workloop.Permanent(
			fmt.Errorf("job %s: spec.completions is required in Indexed completion mode", key),
		)
	}
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}

	// Expectations first: a pod arriving after the pods are listed defers
	// the sync to its own event rather than being missed.
	satisfied := c.exp.Satisfied(key)
	pods, err := c.podsForJob(ctx, key, job)
	if err != nil {
		return err
	}
	jc := &syncContext{
		job:                job,
		pods:               pods,
		activePods:         filterPods(pods, podstate.IsActive),
		expectedRemovals:   newUIDSet(nil),
		uncountedSucceeded: newUIDSet(job.Status.UncountedTerminatedPods.Succeeded),
		uncountedFailed:    newUIDSet(job.Status.UncountedTerminatedPods.Failed),
		terminating:        countTerminating(pods),
	}
	for uid := range c.finalizerExp.expected(key) {
		jc.expectedRemovals[uid] = struct{}{}
	}
	jc.ready = countReady(jc.activePods)
	active := int32(len(jc.activePods))
	newSucceeded := filterPods(
		jc.uncountedPods(jc.uncountedSucceeded),
		func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded },
	)
	newFailed := filterPods(
		jc.uncountedPods(jc.uncountedFailed),
		func(p *corev1.Pod) bool { return isPodFailed(p, job) },
	)
	jc.succeeded = job.Status.Succeeded + int32(
		len(newSucceeded),
	) + int32(
		len(jc.uncountedSucceeded),
	)
	jc.failed = job.Status.Failed + countedFailures(job, newFailed) + int32(len(jc.uncountedFailed))

	if job.Status.StartTime == nil && !isSuspended(job) {
		now := metav1.NewTime(c.clock.Now())
		job.Status.StartTime = &now
	}
	jc.newBackoff = c.backoff.next(key, newSucceeded, newFailed)

	// The end state is evaluated in order: a SuccessCriteriaMet or
	// FailureTarget condition of an earlier sync stands; then failures
	// (pod failure policy, backoffLimit, deadline, failed indexes); then
	// success (success policy, completions).
	jc.finished = successCriteriaMet(job)
	if jc.finished == nil {
		if ft := findCondition(job.Status.Conditions, batchv1.JobFailureTarget); ft != nil &&
			ft.Status == corev1.ConditionTrue {
			jc.finished = newCondition(
				batchv1.JobFailed,
				corev1.ConditionTrue,
				ft.Reason,
				ft.Message,
				c.clock.Now(),
			)
		} else if msg := failJobMessage(job, pods); msg != nil {
			jc.finished = c.failureTarget(batchv1.JobReasonPodFailurePolicy, *msg)
		}
	}
	if jc.finished == nil {
		switch {
		case jc.failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, pods):
			jc.finished = c.failureTarget(
				batchv1.JobReasonBackoffLimitExceeded,
				"Job has reached the specified backoff limit",
			)
		case c.pastActiveDeadline(job):
			jc.finished = c.failureTarget(
				batchv1.JobReasonDeadlineExceeded,
				"Job was active longer than specified deadline",
			)
		case job.Spec.ActiveDeadlineSeconds != nil && !isSuspended(job):
			left := time.Duration(
				*job.Spec.ActiveDeadlineSeconds,
			)*time.Second - c.clock.Since(
				job.Status.StartTime.Time,
			)
			log.V(2).
				Info("Job has activeDeadlineSeconds configuration. Will sync this job again",
					"nextSyncIn", left)
			c.enqueueAfter(key, left)
		}
	}
	if isIndexed(job) {
		jc.prevSucceededIndexes, jc.succeededIndexes = succeededIndexes(log, job, pods)
		jc.succeeded = int32(jc.succeededIndexes.total())
		if hasBackoffLimitPerIndex(job) {
			jc.failedIndexes = failedIndexes(log, job, pods)
			if jc.finished == nil {
				failed := jc.failedIndexes.total()
				switch {
				case job.Spec.MaxFailedIndexes != nil && failed > int(*job.Spec.MaxFailedIndexes):
					jc.finished = c.failureTarget(
						batchv1.JobReasonMaxFailedIndexesExceeded,
						"Job has exceeded the specified maximal number of failed indexes",
					)
				case failed > 0 && failed+jc.succeededIndexes.total() >= int(*job.Spec.Completions):
					jc.finished = c.failureTarget(
						batchv1.JobReasonFailedIndexes,
						"Job has failed indexes",
					)
				}
			}
			jc.delayedPerIndex = delayedDeletions(log, jc)
		}
		if jc.finished == nil {
			if msg, ok := matchSuccessPolicy(log, job.Spec.SuccessPolicy, *job.Spec.Completions,
				jc.succeededIndexes); ok {
				jc.finished = newCondition(
					batchv1.JobSuccessCriteriaMet,
					corev1.ConditionTrue,
					batchv1.JobReasonSuccessPolicy,
					msg,
					c.clock.Now(),
				)
			}
		}
	}

	var manageErr error
	suspendChanged := false
	if jc.finished != nil {
		// Ending: every active pod goes (its finalizer is removed below).
		deletedReady, deleted, err := c.deleteActivePods(ctx, job, jc.activePods)
		if deleted != active || !satisfied {
			// Pods may remain, or be missing from the cache: not yet.
			jc.finished = nil
		}
		active -= deleted
		jc.terminating += deleted
		jc.ready -= deletedReady
		manageErr = err
	} else {
		managed := false
		if satisfied && job.DeletionTimestamp == nil {
			active, manageErr = c.manageJob(ctx, key, jc)
			managed = true
		}
		var complete bool
		if job.Spec.Completions == nil {
			// Without completions, one success completes the Job once no
			// pod runs.
			complete = jc.succeeded > 0 && active == 0
		} else {
			complete = jc.succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			jc.finished = newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue,
				batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods", c.clock.Now())
		case managed && isSuspended(job):
			// Conditions and events change only in a sync that managed pods.
			var changed bool
			job.Status.Conditions, changed = ensureCondition(job.Status.Conditions, batchv1.JobSuspended,
				corev1.ConditionTrue, conditionReasonSuspended, "Job suspended", c.clock.Now())
			if changed {
				suspendChanged = true
				c.recorder.Event(job, corev1.EventTypeNormal, reasonSuspended, "Job suspended")
				if c.resetStartTimeOnSuspend {
					job.Status.StartTime = nil
				}
			}
		case managed:
			var changed bool
			job.Status.Conditions, changed = ensureCondition(job.Status.Conditions, batchv1.JobSuspended,
				corev1.ConditionFalse, conditionReasonResumed, "Job resumed", c.clock.Now())
			if changed {
				suspendChanged = true
				c.recorder.Event(job, corev1.EventTypeNormal, reasonResumed, "Job resumed")
				// activeDeadlineSeconds counts continuous activity: restart it.
				now := metav1.NewTime(c.clock.Now())
				job.Status.StartTime = &now
			}
		}
	}

	needsUpdate := suspendChanged || active != job.Status.Active ||
		!ptr.Equal(
			&jc.ready,
			job.Status.Ready,
		) || !ptr.Equal(&jc.terminating, job.Status.Terminating)
	job.Status.Active = active
	job.Status.Ready = ptr.To(jc.ready)
	job.Status.Terminating = ptr.To(jc.terminating)
	if err := c.trackStatus(ctx, key, jc, needsUpdate); err != nil {
		return fmt.Errorf("tracking status: %w", err)
	}
	return manageErr
}

// countedFailures is how many of failed count against backoffLimit: all of
// them, less those an Ignore rule of the pod failure policy matches.
func countedFailures(j *batchv1.Job, failed []*corev1.Pod) int32 {
	n := int32(len(failed))
	if j.Spec.PodFailurePolicy == nil {
		return n
	}
	for _, p := range failed {
		if !matchPodFailurePolicy(j.Spec.PodFailurePolicy, p).countFailed {
			n--
		}
	}
	return n
}

// pastActiveDeadline: activeDeadlineSeconds passed since startTime, and the
// Job is not suspended.
func (c *controller) pastActiveDeadline(j *batchv1.Job) bool {
	if j.Spec.ActiveDeadlineSeconds == nil || j.Status.StartTime == nil || isSuspended(j) {
		return false
	}
	return c.clock.Since(
		j.Status.StartTime.Time,
	) >= time.Duration(
		*j.Spec.ActiveDeadlineSeconds,
	)*time.Second
}

// podsForJob returns the pods j controls after adopting matching orphans
// (adding the tracking finalizer, which the returned copies show) and
// releasing owned pods that stopped matching (removing it). Pods come from
// the cache and are not to be modified.
func (c *controller) podsForJob(
	ctx context.Context,
	key string,
	j *batchv1.Job,
) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
	if err != nil {
		return nil, workloop.Permanent(fmt.Errorf("couldn't convert Job selector: %w", err))
	}
	candidates, err := index.OwnedAndOrphans(c.podIndexer, j.Namespace, jobKind.Kind, j.Name, j.UID)
	if err != nil {
		return nil, err
	}
	m, err := ownership.New[*corev1.Pod](ownership.Config{
		Owner:     j,
		OwnerKind: jobKind,
		Selector:  sel,
		Patch: func(ctx context.Context, namespace, name string, patch []byte) error {
			patch, err := withFinalizerChange(patch)
			if err != nil {
				return err
			}
			return c.patchJobPod(ctx, key, namespace, name, patch)
		},
		Recheck: func(ctx context.Context) (metav1.Object, error) {
			return c.client.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		},
	})
	if err != nil {
		return nil, err
	}
	pods, err := m.Claim(ctx, candidates)
	if err != nil {
		return pods, err
	}
	for i, p := range pods {
		adopted := !slices.ContainsFunc(
			p.OwnerReferences,
			func(r metav1.OwnerReference) bool { return r.UID == j.UID },
		)
		if adopted && !hasTrackingFinalizer(p) {
			cp := p.DeepCopy()
			cp.Finalizers = append(cp.Finalizers, batchv1.JobTrackingFinalizer)
			pods[i] = cp
		}
	}
	return pods, nil
}

// withFinalizerChange extends an ownership patch as KCM's adoption and
// release do for Jobs: adopting adds the tracking finalizer, releasing
// removes it.
func withFinalizerChange(patch []byte) ([]byte, error) {
	var p map[string]map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("extending an ownership patch: %w", err)
	}
	md := p["metadata"]
	if md == nil {
		return nil, errors.New("extending an ownership patch: it has no metadata")
	}
	release := false
	if refs, ok := md["ownerReferences"].([]any); ok {
		for _, r := range refs {
			if rm, ok := r.(map[string]any); ok && rm["$patch"] == "delete" {
				release = true
			}
		}
	}
	if release {
		md["$deleteFromPrimitiveList/finalizers"] = []string{batchv1.JobTrackingFinalizer}
	} else {
		md["finalizers"] = []string{batchv1.JobTrackingFinalizer}
	}
	return json.Marshal(p)
}

// updateStatus writes j's status and records the write with the staleness
// guard.
func (c *controller) updateStatus(
	ctx context.Context,
	key string,
	j *batchv1.Job,
) (*batchv1.Job, error) {
	updated, err := c.client.BatchV1().
		Jobs(j.Namespace).
		UpdateStatus(ctx, j, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	c.wrote(key, updated)
	return updated, nil
}
