package job

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

// slowStartInitialBatch is the size of the first batch of creates; each
// successful batch doubles the next.
const slowStartInitialBatch = 1

// manageJob creates or deletes pods so that the Job runs as many as it
// should: none while suspended; otherwise parallelism, but no more than
// the completions still missing. A sync either deletes or creates, never
// both. Creation waits out the pod-failure back-off. It returns the number
// of active pods after its changes.
func (c *controller) manageJob(ctx context.Context, key string, jc *syncContext) (int32, error) {
	log := logFrom(ctx)
	job := jc.job
	active := int32(len(jc.activePods))

	if isSuspended(job) {
		log.V(4).Info("Deleting all active pods in suspended job", "active", active)
		victims := podsForRemoval(job, jc.activePods, int(active))
		c.exp.ExpectDeletions(key, podKeys(victims))
		ready, removed, err := c.deleteJobPods(ctx, key, job, victims)
		active -= removed
		jc.terminating += removed
		jc.ready -= ready
		return active, err
	}

	parallelism := ptr.Deref(job.Spec.Parallelism, defaultParallelism)
	var want int32
	if job.Spec.Completions == nil {
		// Once a pod succeeded, let the running ones finish; start none.
		want = parallelism
		if jc.succeeded > 0 {
			want = active
		}
	} else {
		want = max(min(*job.Spec.Completions-jc.succeeded, parallelism), 0)
	}

	victims := podsForRemoval(job, jc.activePods, int(max(active-want, 0)))
	if len(victims) > maxPodChangesPerSync {
		victims = victims[:maxPodChangesPerSync]
	}
	if len(victims) > 0 {
		c.exp.ExpectDeletions(key, podKeys(victims))
		log.V(4).Info("Too many pods running for job", "deleted", len(victims), "target", want)
		ready, removed, err := c.deleteJobPods(ctx, key, job, victims)
		active -= removed
		jc.terminating += removed
		jc.ready -= ready
		return active, err
	}

	var terminating int32
	if onlyReplaceFailed(job) {
		terminating = jc.terminating
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, nil
	}
	if !hasBackoffLimitPerIndex(job) {
		if wait := jc.newBackoff.remaining(c.clock); wait > 0 {
			c.enqueueWithDelay(key, wait)
			return active, nil
		}
	}
	diff = min(diff, maxPodChangesPerSync)

	var indexes []int
	if isIndexed(job) {
		indexes = pendingIndexes(jc, int(diff), int(*job.Spec.Completions))
		if hasBackoffLimitPerIndex(job) {
			var wait time.Duration
			indexes, wait = c.indexesDue(log, indexes, jc.delayedPerIndex)
			if wait > 0 {
				c.enqueueWithDelay(key, wait)
				return active, nil
			}
		}
		diff = int32(len(indexes))
	}

	c.exp.ExpectCreations(key, int(diff))
	log.V(4).Info("Too few pods running", "need", want, "creating", diff)
	active += diff
	template := job.Spec.Template.DeepCopy()
	if isIndexed(job) {
		withIndexEnv(template)
	}
	if !slices.Contains(template.Finalizers, batchv1.JobTrackingFinalizer) {
		template.Finalizers = append(template.Finalizers, batchv1.JobTrackingFinalizer)
	}

	var firstErr error
	var mu sync.Mutex
	for batch := min(diff, slowStartInitialBatch); diff > 0; batch = min(2*batch, diff) {
		failures := 0
		var wg sync.WaitGroup
		for range batch {
			ix := noIndex
			if len(indexes) > 0 {
				ix, indexes = indexes[0], indexes[1:]
			}
			wg.Go(func() {
				t, generateName := template, ""
				if ix != noIndex {
					t, generateName = c.indexedTemplate(log, jc, template, ix)
				}
				err := c.pods.CreatePodWithGenerateName(
					ctx,
					job.Namespace,
					t,
					job,
					metav1.NewControllerRef(job, jobKind),
					generateName,
				)
				if err == nil || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					// A terminating namespace refuses every create; nothing
					// to count or retry.
					return
				}
				log.V(2).Info("Failed creation, decrementing expectations", "err", err.Error())
				c.exp.CreationObserved(key)
				atomic.AddInt32(&active, -1)
				mu.Lock()
				failures++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if skipped := diff - batch; failures > 0 && skipped > 0 {
			log.V(2).
				Info("Slow-start failure. Skipping creating pods, decrementing expectations",
					"skippedCount", skipped)
			active -= skipped
			c.exp.LowerCreations(key, int(skipped))
			break
		}
		diff -= batch
	}
	return active, firstErr
}

// indexedTemplate returns the template of the pod for index ix and its
// generateName: the completion-index annotation and label, the hostname
// "<job>-<ix>" and, with backoffLimitPerIndex, the failure counts carried
// over from the pod it replaces.
func (c *controller) indexedTemplate(
	log logr.Logger,
	jc *syncContext,
	base *corev1.PodTemplateSpec,
	ix int,
) (*corev1.PodTemplateSpec, string) {
	t := base.DeepCopy()
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
	t.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
	t.Spec.Hostname = fmt.Sprintf("%s-%d", jc.job.Name, ix)
	if hasBackoffLimitPerIndex(jc.job) {
		failures, ignored := replacementFailureCounts(log, jc.job, jc.delayedPerIndex[ix])
		t.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
		if ignored > 0 {
			t.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(
				int(ignored),
			)
		}
	}
	return t, indexedGenerateName(jc.job.Name, ix)
}

// indexesDue returns those of indexes whose per-index back-off has passed;
// when none has, the shortest wait.
func (c *controller) indexesDue(
	log logr.Logger,
	indexes []int,
	lastFailed map[int]*corev1.Pod,
) ([]int, time.Duration) {
	var due []int
	var least *time.Duration
	for _, ix := range indexes {
		wait := time.Duration(0)
		if p := lastFailed[ix]; p != nil {
			t := finishTime(p)
			wait = backoffRemaining(c.clock, absoluteFailureCount(log, p)+1, &t)
		}
		if wait == 0 {
			due = append(due, ix)
		} else if least == nil || wait < *least {
			least = &wait
		}
	}
	if len(due) > 0 {
		return due, 0
	}
	return nil, ptr.Deref(least, 0)
}

// enqueueWithDelay syncs key again after d, but not sooner than the batch
// period.
func (c *controller) enqueueWithDelay(key string, d time.Duration) {
	c.enqueueAfter(key, max(d, syncBatchPeriod))
}

// podsForRemoval returns the active pods to delete: for an Indexed Job
// first those without a valid index and the extra pods of repeated
// indexes; then, to reach atLeast, the others in deletion order.
func podsForRemoval(j *batchv1.Job, active []*corev1.Pod, atLeast int) []*corev1.Pod {
	var rm, rest []*corev1.Pod
	if isIndexed(j) {
		rm, rest = duplicateIndexPods(active, int(*j.Spec.Completions))
	} else {
		rest = slices.Clone(active)
	}
	if len(rm) < atLeast {
		sortForDeletion(rest)
		rm = append(rm, rest[:atLeast-len(rm)]...)
	}
	return rm
}

func podKeys(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = podKey(p)
	}
	return out
}

// deleteJobPods removes the tracking finalizer from pods and deletes them,
// in parallel. It returns how many ready pods it deleted (a failed delete
// still counts here, as in KCM), how many pods are gone or going, and the
// first error. Deletions that will not be observed are removed from the
// expectations.
func (c *controller) deleteJobPods(
	ctx context.Context,
	key string,
	job *batchv1.Job,
	pods []*corev1.Pod,
) (int32, int32, error) {
	var ready atomic.Int32
	removed := int32(len(pods))
	errs := make(chan error, len(pods))
	fail := func(p *corev1.Pod, err error) {
		c.exp.DeletionObserved(key, podKey(p))
		if !apierrors.IsNotFound(err) {
			logFrom(ctx).V(2).Info("Failed to delete Pod", "pod", podKey(p), "err", err.Error())
			atomic.AddInt32(&removed, -1)
			errs <- err
		}
	}
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			if hasTrackingFinalizer(p) {
				if err := c.patchJobPod(ctx, key, p.Namespace, p.Name, removeFinalizerPatch); err != nil {
					fail(p, fmt.Errorf("removing completion finalizer: %w", err))
					return
				}
			}
			if err := c.pods.DeletePod(ctx, job.Namespace, p.Name, job); err != nil {
				fail(p, err)
			}
			if podstate.IsReady(p) {
				ready.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	return ready.Load(), atomic.LoadInt32(&removed), <-errs
}

// deleteActivePods deletes pods, keeping their finalizers (the status
// tracking removes them after counting). It returns how many ready pods
// and how many pods in all it deleted, and the first error.
func (c *controller) deleteActivePods(
	ctx context.Context,
	job *batchv1.Job,
	pods []*corev1.Pod,
) (int32, int32, error) {
	var ready atomic.Int32
	removed := int32(len(pods))
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			if err := c.pods.DeletePod(ctx, job.Namespace, p.Name, job); err != nil &&
				!apierrors.IsNotFound(err) {
				atomic.AddInt32(&removed, -1)
				errs <- err
			}
			if podstate.IsReady(p) {
				ready.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	return ready.Load(), atomic.LoadInt32(&removed), <-errs
}
