package ttlafterfinished

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// controller deletes finished Jobs; its keys are namespace/name.
type controller struct {
	client  kubernetes.Interface
	jobs    batchlisters.JobLister
	clock   clock.PassiveClock
	workers int
	loop    *workloop.Loop
	// after requeues a key after a delay: loop.AddAfter, replaced in tests.
	after func(key string, d time.Duration)
}

func newController(cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(cc.Name)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Batch().V1().Jobs()
	c := &controller{
		client:  client,
		jobs:    informer.Lister(),
		clock:   o.Clock,
		workers: int(o.ConcurrentTTLSyncs),
	}
	// The loop exists before any handler is registered: an informer that
	// is already running (warm standby) calls a handler at once. On a
	// later failure it is shut down here; otherwise Run releases it.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{Metrics: cc.Metrics})
	c.after = c.loop.AddAfter
	if err := c.loop.Watch(informer.Informer(), workloop.EnqueueKey(), finishedWithTTL); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the cache, then processes Jobs until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Deleting Jobs after their TTL", "workers", c.workers)
	defer log.Info("Stopped deleting Jobs after their TTL")
	return c.loop.RunWorkers(ctx, c.workers)
}

// finishedWithTTL passes the Jobs to clean up: finished, with a TTL, not
// being deleted. (The deletion event of such a Job passes too; its sync
// finds no Job and does nothing.)
func finishedWithTTL(_, obj any) bool {
	job, ok := workloop.Object[*batchv1.Job](obj)
	return ok && job.DeletionTimestamp == nil && needsCleanup(job)
}

// needsCleanup reports whether j has a TTL and has finished.
func needsCleanup(j *batchv1.Job) bool {
	_, finished := finishCondition(j)
	return j.Spec.TTLSecondsAfterFinished != nil && finished
}

// finishCondition returns the first Complete or Failed condition that is
// true.
func finishCondition(j *batchv1.Job) (batchv1.JobCondition, bool) {
	for _, cond := range j.Status.Conditions {
		if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) &&
			cond.Status == corev1.ConditionTrue {
			return cond, true
		}
	}
	return batchv1.JobCondition{}, false
}

// due reports whether j is to be deleted now, requeueing key for the moment
// its TTL passes when it is not yet. A finished Job without a finish time is
// a permanent error.
func (c *controller) due(ctx context.Context, key string, j *batchv1.Job) (bool, error) {
	if j.DeletionTimestamp != nil || !needsCleanup(j) {
		return false, nil
	}
	cond, _ := finishCondition(j)
	if cond.LastTransitionTime.IsZero() {
		return false, workloop.Permanent(
			fmt.Errorf(
				"job %s: its %s condition has no lastTransitionTime, so its finish time is unknown",
				key,
				cond.Type,
			),
		)
	}
	now := c.clock.Now()
	finished := cond.LastTransitionTime.Time
	if finished.After(now) {
		logr.FromContextOrDiscard(ctx).
			Info("Job finished in the future, probably because of clock skew; deferring its deletion",
				"job", key, "finishTime", finished.UTC(), "now", now.UTC())
	}
	left := finished.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).Sub(now)
	if left > 0 {
		c.after(key, left)
		return false, nil
	}
	return true, nil
}

// sync deletes one Job if its TTL after finishing has passed.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	cached, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if due, err := c.due(ctx, key, cached); !due || err != nil {
		return err
	}
	// The cache may be stale (the TTL raised, the Job replaced): decide on a
	// fresh copy.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if due, err := c.due(ctx, key, fresh); !due || err != nil {
		return err
	}
	foreground := metav1.DeletePropagationForeground
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: &foreground,
		Preconditions: &metav1.Preconditions{
			UID:             &fresh.UID,
			ResourceVersion: &fresh.ResourceVersion,
		},
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("job %s changed since it was read; re-evaluating: %w", key, err)
	case err != nil:
		return err
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Deleted Job after its TTL", "job", key)
	return nil
}
