package job

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/expectations"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podcontrol"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// Timings, as kube-controller-manager has them.
const (
	// syncBatchPeriod delays the syncs pod events and status-only Job
	// updates trigger, so that a burst of them makes one sync.
	syncBatchPeriod = time.Second
	// apiBackoffBase and apiBackoffMax bound the per-key retry back-off
	// after a failed sync.
	apiBackoffBase = time.Second
	apiBackoffMax  = time.Minute
	// podFailureBackoffBase is the delay before a pod replacing a failed
	// one is created; it doubles with each further consecutive failure up
	// to podFailureBackoffMax.
	podFailureBackoffBase = 10 * time.Second
	podFailureBackoffMax  = 10 * time.Minute
	// maxUncountedPods caps status.uncountedTerminatedPods (and so the
	// finalizers removed per sync).
	maxUncountedPods = 500
	// maxPodChangesPerSync caps the pods created or deleted per sync.
	maxPodChangesPerSync = 500
)

// jobKind is the Job's group, version and kind, as written in the
// controller references of its pods.
var jobKind = batchv1.SchemeGroupVersion.WithKind("Job")

// config is everything newController needs.
type config struct {
	// metrics is the registry of the loops' counters (descriptor.Context.Metrics).
	metrics  prometheus.Registerer
	name     string
	client   kubernetes.Interface
	jobs     batchinformers.JobInformer
	pods     coreinformers.PodInformer
	recorder record.EventRecorder // required
	workers  int
	clock    clock.WithTicker // nil: the real clock
	// managedBy: skip Jobs whose spec.managedBy names another controller.
	managedBy bool
	// resetStartTimeOnSuspend: suspending clears status.startTime.
	resetStartTimeOnSuspend bool
	// staleGuard: hold a Job's syncs until its writes are delivered.
	staleGuard bool
	log        logr.Logger
}

// controller is the Job controller. Its main loop's keys are Jobs'
// namespace/name; its orphan loop's keys name pods or label selectors whose
// pods may carry a tracking finalizer nobody else will remove.
type controller struct {
	client   kubernetes.Interface
	pods     podcontrol.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	log      logr.Logger

	jobLister  batchlisters.JobLister
	podLister  corelisters.PodLister
	podIndexer cache.Indexer
	synced     []cache.InformerSynced

	loop    *workloop.Loop
	orphans *workloop.Loop
	workers int

	exp          *expectations.Expectations
	finalizerExp *uidExpectations
	backoff      *backoffStore
	// finishedJobs holds the UIDs of Jobs this controller marked finished
	// whose update has not been delivered yet.
	finishedJobs sync.Map

	managedBy               bool
	resetStartTimeOnSuspend bool
	staleGuard              bool

	// enqueueAfter is loop.AddAfter; tests replace it to observe requeues.
	enqueueAfter func(key string, d time.Duration)
}

// newController registers event handlers and indexes on the informers and
// returns the controller. It starts nothing.
func newController(cfg config) (*controller, error) {
	if cfg.workers < 1 {
		return nil, fmt.Errorf("workers must be at least 1, got %d", cfg.workers)
	}
	if cfg.clock == nil {
		cfg.clock = clock.RealClock{}
	}
	pc, err := podcontrol.New(cfg.client, cfg.recorder)
	if err != nil {
		return nil, err
	}
	var c *controller
	// A pod created for a Job holds the Job's key until the pod informer
	// has delivered it (StaleControllerConsistencyJob).
	pc.OnCreate = func(p *corev1.Pod) {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			c.wrote(p.Namespace+"/"+ref.Name, p)
		}
	}
	c = &controller{
		client:                  cfg.client,
		pods:                    pc,
		recorder:                cfg.recorder,
		clock:                   cfg.clock,
		log:                     cfg.log,
		workers:                 cfg.workers,
		exp:                     expectations.New(cfg.clock),
		finalizerExp:            newUIDExpectations(),
		backoff:                 newBackoffStore(),
		managedBy:               cfg.managedBy,
		resetStartTimeOnSuspend: cfg.resetStartTimeOnSuspend,
		staleGuard:              cfg.staleGuard,
	}
	jobInf := cfg.jobs.Informer()
	podInf := cfg.pods.Informer()
	if err := index.AddPodsByController(podInf); err != nil {
		return nil, err
	}
	c.jobLister = cfg.jobs.Lister()
	c.podLister = cfg.pods.Lister()
	c.podIndexer = podInf.GetIndexer()
	c.synced = []cache.InformerSynced{jobInf.HasSynced, podInf.HasSynced}
	// The loops exist before any handler is registered: an informer that is
	// already running (warm standby) calls them at once. Released on
	// failure here, otherwise by Run.
	c.loop = workloop.New(cfg.name, c.sync, workloop.Options{
		Clock:   cfg.clock,
		Metrics: cfg.metrics,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](
			apiBackoffBase,
			apiBackoffMax,
		),
	})
	c.orphans = workloop.New(cfg.name+"-orphan-pods", c.syncOrphan, workloop.Options{
		Clock:   cfg.clock,
		Metrics: cfg.metrics,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](
			apiBackoffBase,
			apiBackoffMax,
		),
	})
	c.enqueueAfter = c.loop.AddAfter
	shutDown := func() { c.loop.ShutDown(); c.orphans.ShutDown() }
	// Not Loop.Watch: the handlers keep KCM's expectations and its orphan
	// queue beside the main one; they feed the staleness guard themselves
	// (ObserveAdd, Observe, ObserveDelete).
	if _, err := jobInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    c.addJob,
		UpdateFunc: c.updateJob,
		DeleteFunc: c.deleteJob,
	}); err != nil {
		shutDown()
		return nil, fmt.Errorf("job event handler: %w", err)
	}
	// Not Loop.Watch: see the Job handler above (expectations, Observe).
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: func(obj any) { c.deletePod(obj, true) },
	}); err != nil {
		shutDown()
		return nil, fmt.Errorf("pod event handler: %w", err)
	}
	return c, nil
}

// Run waits for the caches, then syncs Jobs and cleans orphan pods, each
// with the configured number of workers, until ctx is done. It releases
// both queues in every case.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting job controller", "workers", c.workers)
	defer log.Info("Shutting down job controller")
	c.loop.WaitFor(c.synced...)
	c.orphans.WaitFor(c.synced...)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, l := range []*workloop.Loop{c.loop, c.orphans} {
		wg.Go(func() { errs <- l.RunWorkers(ctx, c.workers) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func jobKey(j *batchv1.Job) string { return j.Namespace + "/" + j.Name }

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// Event handlers. They never change the objects they are given: they turn
// them into keys and record observed creations, deletions and finalizer
// removals in the expectations, as KCM does.

func (c *controller) addJob(obj any, isInInitialList bool) {
	c.loop.ObserveAdd(obj, isInInitialList)
	if j, ok := obj.(*batchv1.Job); ok {
		c.loop.Add(jobKey(j))
	}
}

func (c *controller) updateJob(oldObj, newObj any) {
	c.loop.Observe(newObj)
	old, ok1 := oldObj.(*batchv1.Job)
	cur, ok2 := newObj.(*batchv1.Job)
	if !ok1 || !ok2 {
		return
	}
	key := jobKey(cur)
	if isFinished(cur) {
		// The finalizers should all be gone by now; this is a backstop.
		c.enqueueSelector(cur)
		return
	}
	if cur.Generation == old.Generation {
		c.loop.AddAfter(key, syncBatchPeriod)
	} else {
		c.loop.Add(key)
	}
	// A changed activeDeadlineSeconds needs a sync when it passes.
	if cur.Status.StartTime != nil && cur.Spec.ActiveDeadlineSeconds != nil {
		if o := old.Spec.ActiveDeadlineSeconds; o == nil || *o != *cur.Spec.ActiveDeadlineSeconds {
			total := time.Duration(*cur.Spec.ActiveDeadlineSeconds) * time.Second
			c.enqueueAfter(key, total-c.clock.Since(cur.Status.StartTime.Time))
		}
	}
}

func (c *controller) deleteJob(obj any) {
	c.loop.ObserveDelete(obj)
	j, ok := workloop.Object[*batchv1.Job](obj)
	if !ok {
		c.log.Error(
			errors.New("unexpected object"),
			"Ignoring a Job delete event",
			"type",
			fmt.Sprintf("%T", obj),
		)
		return
	}
	key := jobKey(j)
	c.loop.Add(key)
	c.finishedJobs.Delete(j.UID)
	c.enqueueSelector(j)
	c.backoff.remove(key)
}

// resolve returns the Job ref names, from the cache, if it has ref's UID.
func (c *controller) resolve(namespace string, ref *metav1.OwnerReference) *batchv1.Job {
	j, _ := ownership.Owner(ref, jobKind.Kind, c.jobLister.Jobs(namespace).Get)
	return j
}

// jobsSelecting returns the Jobs whose selector matches p's labels.
func (c *controller) jobsSelecting(p *corev1.Pod) []*batchv1.Job {
	jobs, err := c.jobLister.GetPodJobs(p)
	if err != nil {
		return nil
	}
	if len(jobs) > 1 {
		c.log.Info(
			"More than one Job selects a pod; only one can adopt it",
			"pod",
			podKey(p),
			"labels",
			p.Labels,
		)
	}
	out := make([]*batchv1.Job, 0, len(jobs))
	for i := range jobs {
		out = append(out, &jobs[i])
	}
	return out
}

func (c *controller) addPod(obj any, isInInitialList bool) {
	c.loop.ObserveAdd(obj, isInInitialList)
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if p.DeletionTimestamp != nil {
		// Seen for the first time already terminating: a deletion, not a
		// creation, to observe.
		c.deletePod(p, false)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		j := c.resolve(p.Namespace, ref)
		if j == nil {
			return
		}
		c.exp.CreationObserved(jobKey(j))
		c.loop.AddAfter(jobKey(j), syncBatchPeriod)
		return
	}
	if hasTrackingFinalizer(p) {
		c.enqueueOrphanPod(p)
	}
	for _, j := range c.jobsSelecting(p) {
		c.loop.AddAfter(jobKey(j), syncBatchPeriod)
	}
}

func (c *controller) updatePod(oldObj, newObj any) {
	c.loop.Observe(newObj)
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || cur.ResourceVersion == old.ResourceVersion {
		return
	}
	if cur.DeletionTimestamp != nil {
		// Graceful deletion began: count the pod as gone now.
		c.deletePod(cur, false)
		return
	}
	// The old object's finalizer is not consulted: during an ownership
	// change it may have been re-added and removed again in one event.
	finalizerGone := !hasTrackingFinalizer(cur)
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !equality.Semantic.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if j := c.resolve(old.Namespace, oldRef); j != nil {
			if finalizerGone {
				c.finalizerExp.observed(jobKey(j), cur.UID)
			}
			c.loop.AddAfter(jobKey(j), syncBatchPeriod)
		}
	}
	if curRef != nil {
		j := c.resolve(cur.Namespace, curRef)
		if j == nil {
			return
		}
		if finalizerGone {
			c.finalizerExp.observed(jobKey(j), cur.UID)
		}
		c.loop.AddAfter(jobKey(j), syncBatchPeriod)
		return
	}
	if hasTrackingFinalizer(cur) {
		c.enqueueOrphanPod(cur)
	}
	if refChanged || !equality.Semantic.DeepEqual(old.Labels, cur.Labels) {
		for _, j := range c.jobsSelecting(cur) {
			c.loop.AddAfter(jobKey(j), syncBatchPeriod)
		}
	}
}

// deletePod handles a pod's deletion; final is true for the informer's
// delete event, false for a deletionTimestamp seen in an add or update.
func (c *controller) deletePod(obj any, final bool) {
	if final {
		c.loop.ObserveDelete(obj)
	}
	p, ok := workloop.Object[*corev1.Pod](obj)
	if !ok {
		c.log.Error(
			errors.New("unexpected object"),
			"Ignoring a pod delete event",
			"type",
			fmt.Sprintf("%T", obj),
		)
		return
	}
	ref := metav1.GetControllerOfNoCopy(p)
	finalizer := hasTrackingFinalizer(p)
	if ref == nil {
		// It may have been a Job's before the garbage collector released it.
		if finalizer {
			c.enqueueOrphanPod(p)
		}
		return
	}
	j := c.resolve(p.Namespace, ref)
	if j == nil || isFinished(j) {
		// No sync of a Job will remove this finalizer.
		if finalizer {
			c.enqueueOrphanPod(p)
		}
		return
	}
	key := jobKey(j)
	c.exp.DeletionObserved(key, podKey(p))
	if final || !finalizer {
		c.finalizerExp.observed(key, p.UID)
	}
	c.loop.AddAfter(key, syncBatchPeriod)
}
