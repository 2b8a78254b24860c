package job

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// trackStatus counts finished pods through status.uncountedTerminatedPods
// and the tracking finalizers, and finishes the Job when it can:
//
//  1. finished pods whose finalizer may go are added to the uncounted
//     lists (Indexed Jobs: their indexes to completedIndexes), the interim
//     FailureTarget or SuccessCriteriaMet condition too, and the status is
//     written;
//  2. their finalizers are removed;
//  3. the pods whose finalizer is gone move from the uncounted lists to
//     the counters;
//  4. with nothing left uncounted and no pod terminating, the Failed or
//     Complete condition is added; the status is written again if needed.
//
// At most maxUncountedPods pods are taken per sync.
func (c *controller) trackStatus(
	ctx context.Context,
	key string,
	jc *syncContext,
	needsFlush bool,
) error {
	log := logFrom(ctx)
	job := jc.job
	indexed := isIndexed(job)
	pods := jc.pods
	if indexed {
		pods = slices.Clone(pods)
		slices.SortStableFunc(
			pods,
			func(a, b *corev1.Pod) int { return cmp.Compare(completionIndex(a), completionIndex(b)) },
		)
	}
	withFinalizer := uidSet{}
	for _, p := range pods {
		if hasTrackingFinalizer(p) && !jc.expectedRemovals.has(p.UID) {
			withFinalizer[p.UID] = struct{}{}
		}
	}
	if countUncounted(&job.Status, withFinalizer) {
		needsFlush = true
	}

	uncounted := job.Status.UncountedTerminatedPods
	var toRelease []*corev1.Pod
	var newIndexes []int
	full := false
	for _, p := range pods {
		if !hasTrackingFinalizer(p) || jc.expectedRemovals.has(p.UID) {
			continue // counted in an earlier sync
		}
		failed := isPodFailed(p, job)
		if !canRemoveFinalizer(log, jc, p, failed) {
			continue
		}
		toRelease = append(toRelease, p)
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !jc.uncountedFailed.has(p.UID):
			if indexed {
				if ix, ok := validIndex(job, p); ok && !jc.prevSucceededIndexes.has(ix) {
					newIndexes = append(newIndexes, ix)
					needsFlush = true
				}
			} else if !jc.uncountedSucceeded.has(p.UID) {
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
				needsFlush = true
			}
		case failed || jc.finished != nil && !isSuccessCriteriaMet(jc.finished):
			// Once the Job is failing, every unfinished pod counts as failed.
			_, valid := validIndex(job, p)
			if !jc.uncountedFailed.has(p.UID) && (!indexed || valid) {
				if job.Spec.PodFailurePolicy == nil ||
					matchPodFailurePolicy(job.Spec.PodFailurePolicy, p).countFailed {
					uncounted.Failed = append(uncounted.Failed, p.UID)
					needsFlush = true
				}
			}
		}
		if len(newIndexes)+len(uncounted.Succeeded)+len(uncounted.Failed) >= maxUncountedPods {
			// Keep status small and leave time for other Jobs: the status
			// and pod updates bring this Job back.
			full = true
			break
		}
	}
	if indexed {
		slices.Sort(newIndexes)
		jc.succeededIndexes = jc.succeededIndexes.withIndexes(slices.Compact(newIndexes))
		completed := jc.succeededIndexes.String()
		if completed != job.Status.CompletedIndexes {
			needsFlush = true
		}
		job.Status.Succeeded = int32(jc.succeededIndexes.total())
		job.Status.CompletedIndexes = completed
		var failedStr *string
		if jc.failedIndexes != nil {
			failedStr = ptr.To(jc.failedIndexes.String())
		}
		if !ptr.Equal(job.Status.FailedIndexes, failedStr) {
			job.Status.FailedIndexes = failedStr
			needsFlush = true
		}
	}
	if jc.finished != nil && jc.finished.Type == batchv1.JobFailureTarget {
		// The interim condition is written before any finalizer goes; the
		// final one follows once every pod is counted.
		job.Status.Conditions = append(job.Status.Conditions, *jc.finished)
		needsFlush = true
		jc.finished = newCondition(
			batchv1.JobFailed,
			corev1.ConditionTrue,
			jc.finished.Reason,
			jc.finished.Message,
			c.clock.Now(),
		)
	}
	if isSuccessCriteriaMet(jc.finished) {
		if successCriteriaMet(job) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *jc.finished)
			needsFlush = true
		}
		jc.finished = newCondition(
			batchv1.JobComplete,
			corev1.ConditionTrue,
			jc.finished.Reason,
			jc.finished.Message,
			c.clock.Now(),
		)
	}

	var err error
	if needsFlush, err = c.flushAndRelease(ctx, key, jc, toRelease, withFinalizer,
		needsFlush); err != nil {
		return err
	}
	finished := !full && c.enactFinished(log, jc)
	if !needsFlush && !finished {
		return nil
	}
	if _, err := c.updateStatus(ctx, key, jc.job); err != nil {
		return fmt.Errorf("removing uncounted pods from status: %w", err)
	}
	if finished {
		c.recordFinished(jc.job, jc.finished)
		c.finishedJobs.Store(jc.job.UID, struct{}{})
	}
	return nil
}

// canRemoveFinalizer: the Job is being deleted or ending, the pod
// succeeded, or it failed and is not kept for its index's replacement.
func canRemoveFinalizer(log logr.Logger, jc *syncContext, p *corev1.Pod, failed bool) bool {
	if jc.job.DeletionTimestamp != nil || jc.finished != nil ||
		p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if !failed {
		return false
	}
	if hasBackoffLimitPerIndex(jc.job) {
		if ix := completionIndex(p); ix != noIndex {
			if kept, ok := jc.delayedPerIndex[ix]; ok && kept.UID == p.UID {
				log.V(3).
					Info("Delaying pod finalizer removal to await for pod recreation within the index",
						"pod", podKey(p))
				return false
			}
		}
	}
	return true
}

// flushAndRelease writes the status when needed (then saves the back-off
// record), removes the finalizers of toRelease, and moves the pods whose
// finalizer is gone from the uncounted lists to the counters. If some
// removal failed, it writes that partial progress. It returns whether the
// status still holds unwritten changes. jc.job becomes the written Job.
func (c *controller) flushAndRelease(
	ctx context.Context,
	key string,
	jc *syncContext,
	toRelease []*corev1.Pod,
	withFinalizer uidSet,
	needsFlush bool,
) (bool, error) {
	if needsFlush {
		updated, err := c.updateStatus(ctx, key, jc.job)
		if err != nil {
			return needsFlush, fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		jc.job = updated
		c.backoff.update(jc.newBackoff)
		needsFlush = false
	}
	var rmErr error
	if len(toRelease) > 0 {
		var done []bool
		done, rmErr = c.removeFinalizers(ctx, key, toRelease)
		for i, p := range toRelease {
			if done[i] {
				delete(withFinalizer, p.UID)
			}
		}
	}
	if countUncounted(&jc.job.Status, withFinalizer) {
		needsFlush = true
	}
	if rmErr != nil && needsFlush {
		if _, err := c.updateStatus(ctx, key, jc.job); err != nil {
			return needsFlush, fmt.Errorf("removing uncounted pods from status: %w", err)
		}
	}
	return needsFlush, rmErr
}

// countUncounted moves the uncounted pods that no longer hold a finalizer
// to status.succeeded and status.failed; it reports whether any moved.
func countUncounted(st *batchv1.JobStatus, withFinalizer uidSet) bool {
	u := st.UncountedTerminatedPods
	if u == nil {
		return false
	}
	keep := func(uids []types.UID) []types.UID {
		var out []types.UID
		for _, uid := range uids {
			if withFinalizer.has(uid) {
				out = append(out, uid)
			}
		}
		return out
	}
	changed := false
	if rest := keep(u.Succeeded); len(rest) != len(u.Succeeded) {
		st.Succeeded += int32(len(u.Succeeded) - len(rest))
		u.Succeeded = rest
		changed = true
	}
	if rest := keep(u.Failed); len(rest) != len(u.Failed) {
		st.Failed += int32(len(u.Failed) - len(rest))
		u.Failed = rest
		changed = true
	}
	return changed
}

// removeFinalizers takes the tracking finalizer off pods, in parallel,
// expecting each removal first. done[i] tells whether pods[i] has lost it
// (or is gone).
func (c *controller) removeFinalizers(
	ctx context.Context,
	key string,
	pods []*corev1.Pod,
) ([]bool, error) {
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	c.finalizerExp.expect(key, uids)
	done := make([]bool, len(pods))
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		if !hasTrackingFinalizer(p) {
			continue
		}
		wg.Go(func() {
			if err := c.patchJobPod(ctx, key, p.Namespace, p.Name, removeFinalizerPatch); err != nil {
				// No update will show this removal.
				c.finalizerExp.observed(key, p.UID)
				if !apierrors.IsNotFound(err) {
					logFrom(ctx).Error(err, "Removing tracking finalizer", "pod", podKey(p))
					errs <- err
					return
				}
			}
			done[i] = true
		})
	}
	wg.Wait()
	close(errs)
	return done, <-errs
}

// enactFinished adds the final condition (and completionTime) when the Job
// has one and nothing is left uncounted or terminating.
func (c *controller) enactFinished(log logr.Logger, jc *syncContext) bool {
	if jc.finished == nil {
		return false
	}
	job := jc.job
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		log.V(4).
			Info("Delaying marking the Job as finished, because there are still uncounted pod(s)",
				"condition", jc.finished.Type, "count", len(u.Succeeded)+len(u.Failed))
		return false
	}
	if jc.terminating > 0 {
		log.V(4).
			Info("Delaying marking the Job as finished, because there are still terminating pod(s)",
				"condition", jc.finished.Type, "count", jc.terminating)
		return false
	}
	f := jc.finished
	job.Status.Conditions, _ = ensureCondition(
		job.Status.Conditions,
		f.Type,
		f.Status,
		f.Reason,
		f.Message,
		c.clock.Now(),
	)
	if f.Type == batchv1.JobComplete {
		job.Status.CompletionTime = &f.LastTransitionTime
	}
	return true
}

// recordFinished records the events of a Job that finished.
func (c *controller) recordFinished(job *batchv1.Job, f *batchv1.JobCondition) {
	if f.Type == batchv1.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			c.recorder.Event(
				job,
				corev1.EventTypeWarning,
				reasonTooManySucceededPods,
				"Too many succeeded pods running after completion count reached",
			)
		}
		c.recorder.Event(job, corev1.EventTypeNormal, reasonCompleted, "Job completed")
		return
	}
	c.recorder.Event(job, corev1.EventTypeWarning, f.Reason, f.Message)
}
