package cronjob

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// cronJobKind is the CronJob's group, version and kind, as written in the
// controller references of its Jobs.
var cronJobKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// config is everything newController needs.
type config struct {
	// metrics is the registry of the loops' counters (descriptor.Context.Metrics).
	metrics  prometheus.Registerer
	name     string
	client   kubernetes.Interface
	cronJobs batchinformers.CronJobInformer
	jobs     batchinformers.JobInformer
	recorder record.EventRecorder // required
	workers  int
	clock    clock.WithTicker // nil: the real clock
	log      logr.Logger
}

// controller is the CronJob controller; its keys are CronJobs'
// namespace/name.
type controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	log      logr.Logger

	cronJobLister batchlisters.CronJobLister
	jobIndexer    cache.Indexer
	synced        []cache.InformerSynced

	loop    *workloop.Loop
	workers int

	// enqueueNow and enqueueAfter are loop.Add and loop.AddAfter; tests
	// replace them to observe what handlers enqueue.
	enqueueNow   func(key string)
	enqueueAfter func(key string, d time.Duration)
}

// newController registers event handlers and the Job index on the
// informers and returns the controller. It starts nothing.
func newController(cfg config) (*controller, error) {
	if cfg.workers < 1 {
		return nil, fmt.Errorf("workers must be at least 1, got %d", cfg.workers)
	}
	if cfg.recorder == nil {
		return nil, fmt.Errorf("an event recorder is required")
	}
	if cfg.clock == nil {
		cfg.clock = clock.RealClock{}
	}
	cjInf := cfg.cronJobs.Informer()
	jobInf := cfg.jobs.Informer()
	if err := index.AddByControllerUID(jobInf); err != nil {
		return nil, fmt.Errorf("job index: %w", err)
	}
	c := &controller{
		client:        cfg.client,
		recorder:      cfg.recorder,
		clock:         cfg.clock,
		log:           cfg.log,
		cronJobLister: cfg.cronJobs.Lister(),
		jobIndexer:    jobInf.GetIndexer(),
		synced:        []cache.InformerSynced{cjInf.HasSynced, jobInf.HasSynced},
		workers:       cfg.workers,
	}
	// The loop exists before any handler is registered: an informer that is
	// already running (warm standby) calls them at once. Released on
	// failure here, otherwise by Run.
	c.loop = workloop.New(
		cfg.name,
		c.sync,
		workloop.Options{Clock: cfg.clock, Metrics: cfg.metrics},
	)
	c.enqueueNow, c.enqueueAfter = c.loop.Add, c.loop.AddAfter
	// Not Loop.Watch: a changed schedule or time zone requeues the CronJob at
	// its next schedule time (updateCronJob), as KCM does, not at once.
	if _, err := cjInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.updateCronJob,
		DeleteFunc: c.enqueue,
	}); err != nil {
		c.loop.ShutDown()
		return nil, fmt.Errorf("cronjob event handler: %w", err)
	}
	// Not Loop.Watch: a Job queues the CronJob that owns it, looked up in the
	// cache (owner), and only then.
	if _, err := jobInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addJob,
		UpdateFunc: c.updateJob,
		DeleteFunc: c.jobGone,
	}); err != nil {
		c.loop.ShutDown()
		return nil, fmt.Errorf("job event handler: %w", err)
	}
	return c, nil
}

// Run waits for the caches, then syncs CronJobs with the configured number
// of workers until ctx is done. It releases the queue in every case.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting cronjob controller", "workers", c.workers)
	defer log.Info("Shutting down cronjob controller")
	c.loop.WaitFor(c.synced...)
	return c.loop.RunWorkers(ctx, c.workers)
}

func (c *controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.enqueueNow(key)
	}
}

// updateCronJob syncs a CronJob at once, except when its schedule or time
// zone changed: then at its next schedule time under the new schedule (an
// earlier pending sync still happens).
func (c *controller) updateCronJob(old, cur any) {
	oldCJ, ok1 := old.(*batchv1.CronJob)
	cj, ok2 := cur.(*batchv1.CronJob)
	if !ok1 || !ok2 {
		return
	}
	if oldCJ.Spec.Schedule == cj.Spec.Schedule && ptr.Equal(oldCJ.Spec.TimeZone, cj.Spec.TimeZone) {
		c.enqueue(cj)
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(cj)
	if err != nil {
		return
	}
	sched, err := parseSchedule(scheduleSpec(cj, nil))
	if err != nil {
		c.log.V(2).
			Info("Unparseable schedule for CronJob", "cronjob", key, "schedule", cj.Spec.Schedule,
				"err", err.Error())
		c.recorder.Eventf(
			cj,
			corev1.EventTypeWarning,
			"UnParseableCronJobSchedule",
			"unparseable schedule for cronjob: %s",
			cj.Spec.Schedule,
		)
		return
	}
	c.enqueueAfter(key, untilNext(cj, c.clock.Now(), sched))
}

// owner returns the CronJob ref names in namespace if it is the one ref
// points to (same UID), else nil.
func (c *controller) owner(namespace string, ref *metav1.OwnerReference) *batchv1.CronJob {
	if ref == nil || ref.Kind != cronJobKind.Kind {
		return nil
	}
	cj, err := c.cronJobLister.CronJobs(namespace).Get(ref.Name)
	if err != nil || cj.UID != ref.UID {
		return nil
	}
	return cj
}

func (c *controller) addJob(obj any) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	if cj := c.owner(j.Namespace, metav1.GetControllerOfNoCopy(j)); cj != nil {
		c.enqueue(cj)
	}
}

// updateJob syncs the CronJob that controls the Job and, when the
// controller reference changed, the one that did.
func (c *controller) updateJob(old, cur any) {
	oldJob, ok1 := old.(*batchv1.Job)
	j, ok2 := cur.(*batchv1.Job)
	if !ok1 || !ok2 || oldJob.ResourceVersion == j.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOfNoCopy(oldJob), metav1.GetControllerOfNoCopy(j)
	if oldRef != nil && !equality.Semantic.DeepEqual(oldRef, ref) {
		if cj := c.owner(oldJob.Namespace, oldRef); cj != nil {
			c.enqueue(cj)
		}
	}
	if cj := c.owner(j.Namespace, ref); cj != nil {
		c.enqueue(cj)
	}
}

func (c *controller) jobGone(obj any) {
	j, ok := workloop.Object[*batchv1.Job](obj)
	if !ok {
		return
	}
	if cj := c.owner(j.Namespace, metav1.GetControllerOfNoCopy(j)); cj != nil {
		c.enqueue(cj)
	}
}
