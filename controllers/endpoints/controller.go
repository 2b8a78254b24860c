package endpoints

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	esutil "k8s.io/endpointslice/util"

	"github.com/ctrlhost/ctrlhost/controllers/internal/servicepods"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// maxRetries is how many failed syncs in a row a Service gets before it is
// dropped until its next change, as in KCM.
const maxRetries = 15

// controller keeps one Endpoints object per selector Service; its keys are
// the Services' namespace/name.
type controller struct {
	client    kubernetes.Interface
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	recorder  record.EventRecorder
	stale     *staleTracker
	triggers  *esutil.TriggerTimeTracker
	batch     time.Duration
	workers   int
	synced    []cache.InformerSynced
	loop      *workloop.Loop
	// podQueue finds the Services of changed pods, after the caches
	// synced, as KCM's pod queue does.
	podQueue *servicepods.Queue
	// after enqueues a key after a delay: loop.AddAfter, replaced in tests.
	after func(key string, d time.Duration)
}

func newSyncer(
	client kubernetes.Interface,
	services corelisters.ServiceLister,
	pods corelisters.PodLister,
	endpoints corelisters.EndpointsLister,
	recorder record.EventRecorder,
	o Options,
) *controller {
	c := &controller{
		client:    client,
		services:  services,
		pods:      pods,
		endpoints: endpoints,
		recorder:  recorder,
		stale:     newStaleTracker(),
		triggers:  esutil.NewTriggerTimeTracker(),
		batch:     o.EndpointUpdatesBatchPeriod,
		workers:   int(o.ConcurrentEndpointSyncs),
	}
	c.podQueue = servicepods.New(
		services,
		func(key string, d time.Duration) { c.after(key, d) },
		c.batch,
	)
	return c
}

func newController(ctx context.Context, cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	core := cc.InformerFactory.Core().V1()
	c := newSyncer(
		client,
		core.Services().Lister(),
		core.Pods().Lister(),
		core.Endpoints().Lister(),
		cc.EventRecorder,
		o,
	)
	// The loop exists before any handler is registered: a running informer
	// calls a handler at once. On a later failure it is shut down here;
	// otherwise Run releases it.
	c.loop = workloop.New(
		cc.Name,
		c.sync,
		workloop.Options{MaxRetries: maxRetries, Metrics: cc.Metrics},
	)
	c.after = c.loop.AddAfter
	handlers := []struct {
		what string
		inf  cache.SharedIndexInformer
		h    cache.ResourceEventHandler
	}{
		{"service", core.Services().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, obj any) { c.enqueue(obj) },
			DeleteFunc: c.enqueue,
		}},
		{"pod", core.Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.podQueue.PodChanged(nil, obj) },
			UpdateFunc: c.podQueue.PodChanged,
			DeleteFunc: func(obj any) { c.podQueue.PodChanged(obj, nil) },
		}},
		// A deleted Endpoints object is recreated if its Service still
		// wants one.
		{
			"endpoints",
			core.Endpoints().Informer(),
			cache.ResourceEventHandlerFuncs{DeleteFunc: c.enqueue},
		},
	}
	for _, h := range handlers {
		// Not Loop.Watch: services queue through c.after (a test's fixture
		// records the delays), and pods go through the batching pod queue.
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			c.loop.ShutDown()
			c.podQueue.ShutDown()
			return nil, fmt.Errorf("%s event handler: %w", h.what, err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// Run waits for the caches, queues every Endpoints object (so that those
// whose Service went while no controller ran are deleted), then syncs
// Services until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting endpoint controller", "workers", c.workers)
	defer log.Info("Shutting down endpoint controller")
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.loop.ShutDown()
		c.podQueue.ShutDown()
		return nil
	}
	c.enqueueLeftovers(log)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { c.podQueue.Run(ctx, c.workers) })
	return c.loop.RunWorkers(ctx, c.workers)
}

// enqueueLeftovers queues every Endpoints object but leader-election locks.
func (c *controller) enqueueLeftovers(log logr.Logger) {
	all, err := c.endpoints.List(labels.Everything())
	if err != nil {
		log.Error(err, "Listing Endpoints; orphaned Endpoints will not be cleaned up")
		return
	}
	for _, ep := range all {
		if _, lock := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]; lock {
			continue
		}
		c.enqueue(ep)
	}
}

func (c *controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.after(key, 0)
	}
}

// isServiceIPSet reports whether svc has a cluster IP (is not headless).
func isServiceIPSet(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.ClusterIP != ""
}
