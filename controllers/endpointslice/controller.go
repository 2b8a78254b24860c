package endpointslice

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	endpointslicerec "k8s.io/endpointslice"
	"k8s.io/endpointslice/topologycache"
	esutil "k8s.io/endpointslice/util"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/servicepods"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// KCM's retry policy for this controller: a Service is dropped after 15
// failed syncs in a row; retries back off from 1s to 1000s, and all retries
// together are held to 10 per second (bursts of 100).
const (
	maxRetries = 15
	minBackOff = time.Second
	maxBackOff = 1000 * time.Second
	// sliceChangeMinDelay is the least delay before a Service is synced
	// again after one of its EndpointSlices changed behind the
	// controller's back, so that changes to several slices are handled in
	// one sync.
	sliceChangeMinDelay = time.Second
)

// topologyKey is the work-queue key that re-reads the Nodes into the
// topology cache. Service keys are namespace/name; this one has no slash,
// so it never names a Service.
const topologyKey = "nodes-topology"

// controller keeps the EndpointSlices of selector Services in step with
// their pods; its keys are the Services' namespace/name.
type controller struct {
	client     kubernetes.Interface
	services   corelisters.ServiceLister
	pods       corelisters.PodLister
	slices     discoverylisters.EndpointSliceLister
	nodes      corelisters.NodeLister
	recorder   record.EventRecorder
	tracker    *esutil.EndpointSliceTracker
	triggers   *esutil.TriggerTimeTracker
	topology   *topologycache.TopologyCache
	reconciler *endpointslicerec.Reconciler
	batch      time.Duration
	workers    int
	loop       *workloop.Loop
	synced     []cache.InformerSynced
	// podQueue finds the Services of changed pods, after the caches
	// synced, as KCM's pod queue does.
	podQueue *servicepods.Queue
	// after enqueues a key after a delay: loop.AddAfter, replaced in tests.
	after func(key string, d time.Duration)
}

// retryLimiter is KCM's rate limiter for this controller.
func retryLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](minBackOff, maxBackOff),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

func newController(ctx context.Context, cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(Name)
	if err != nil {
		return nil, err
	}
	core := cc.InformerFactory.Core().V1()
	slices := cc.InformerFactory.Discovery().V1().EndpointSlices()
	c := newSyncer(
		client,
		core.Services().Lister(),
		core.Pods().Lister(),
		slices.Lister(),
		core.Nodes().Lister(),
		cc.EventRecorder,
		o,
		gate.Enabled(cc.FeatureGate, FeaturePreferSameTrafficDistribution, true),
	)
	c.workers = int(o.ConcurrentServiceEndpointSyncs)
	// The loop exists before any handler is registered: a running informer
	// calls a handler at once. On a later failure it is shut down here;
	// otherwise Run releases it.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{
		MaxRetries: maxRetries, RateLimiter: retryLimiter(), Metrics: cc.Metrics})
	c.after = c.loop.AddAfter
	log := logr.FromContextOrDiscard(ctx)
	handlers := []struct {
		what string
		inf  cache.SharedIndexInformer
		h    cache.ResourceEventHandler
	}{
		{"service", core.Services().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.serviceChanged,
			UpdateFunc: func(_, obj any) { c.serviceChanged(obj) },
			DeleteFunc: c.serviceChanged,
		}},
		{"pod", core.Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.podQueue.PodChanged(nil, obj) },
			UpdateFunc: c.podQueue.PodChanged,
			DeleteFunc: func(obj any) { c.podQueue.PodChanged(obj, nil) },
		}},
		{"endpointslice", slices.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.sliceAdded,
			UpdateFunc: func(old, obj any) { c.sliceUpdated(log, old, obj) },
			DeleteFunc: c.sliceDeleted,
		}},
		{"node", core.Nodes().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.loop.Add(topologyKey) },
			UpdateFunc: c.nodeUpdated,
			DeleteFunc: func(any) { c.loop.Add(topologyKey) },
		}},
	}
	for _, h := range handlers {
		// Not Loop.Watch: pods go through the batching pod queue, slices map to
		// their Service only when this controller manages them, and nodes queue
		// the topology key.
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

// newSyncer returns a controller without a loop: what sync needs. Its pod
// queue runs a goroutine until Run or podQueue.ShutDown releases it.
func newSyncer(
	client kubernetes.Interface,
	services corelisters.ServiceLister,
	pods corelisters.PodLister,
	slices discoverylisters.EndpointSliceLister,
	nodes corelisters.NodeLister,
	recorder record.EventRecorder,
	o Options,
	preferSame bool,
) *controller {
	c := &controller{
		client:   client,
		services: services,
		pods:     pods,
		slices:   slices,
		nodes:    nodes,
		recorder: recorder,
		tracker:  esutil.NewEndpointSliceTracker(),
		triggers: esutil.NewTriggerTimeTracker(),
		topology: topologycache.NewTopologyCache(),
		batch:    o.EndpointUpdatesBatchPeriod,
	}
	c.podQueue = servicepods.New(
		services,
		func(key string, d time.Duration) { c.after(key, d) },
		c.batch,
	)
	c.reconciler = endpointslicerec.NewReconciler(
		client,
		nodes,
		o.MaxEndpointsPerSlice,
		c.tracker,
		c.topology,
		recorder,
		managedBy,
		endpointslicerec.WithPreferSameTrafficDistributionEnabled(preferSame),
	)
	return c
}

// Run waits for the caches, then syncs Services until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting endpoint slice controller", "workers", c.workers)
	defer log.Info("Shutting down endpoint slice controller")
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.loop.ShutDown()
		c.podQueue.ShutDown()
		return nil
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { c.podQueue.Run(ctx, c.workers) })
	return c.loop.RunWorkers(ctx, c.workers)
}

func (c *controller) serviceChanged(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.loop.Add(key)
	}
}

func (c *controller) sliceAdded(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if ok && c.reconciler.ManagedByController(s) && c.tracker.ShouldSync(s) {
		c.enqueueServiceOf(s)
	}
}

func (c *controller) sliceUpdated(log logr.Logger, oldObj, obj any) {
	old, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	s, ok2 := obj.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return
	}
	// Relabelling a slice to another Service does not bump its
	// generation: both Services are synced.
	if before, now := old.Labels[discoveryv1.LabelServiceName],
		s.Labels[discoveryv1.LabelServiceName]; before != now {
		log.Info(
			"EndpointSlice moved to another Service",
			"endpointslice",
			s.Namespace+"/"+s.Name,
			"oldService",
			before,
			"newService",
			now,
		)
		c.enqueueServiceOf(s)
		c.enqueueServiceOf(old)
		return
	}
	if c.reconciler.ManagedByChanged(old, s) ||
		c.reconciler.ManagedByController(s) && c.tracker.ShouldSync(s) {
		c.enqueueServiceOf(s)
	}
}

func (c *controller) sliceDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || !c.reconciler.ManagedByController(s) || !c.tracker.Has(s) {
		return
	}
	// A deletion the controller did not make is repaired.
	if !c.tracker.HandleDeletion(s) {
		c.enqueueServiceOf(s)
	}
}

func (c *controller) enqueueServiceOf(s *discoveryv1.EndpointSlice) {
	key, err := endpointslicerec.ServiceControllerKey(s)
	if err != nil {
		return
	}
	c.after(key, max(sliceChangeMinDelay, c.batch))
}

// nodeUpdated re-reads the topology when a Node's readiness or zone
// changed (a cloud provider may add the zone label late).
func (c *controller) nodeUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*corev1.Node)
	n, ok2 := obj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if nodeReady(old) != nodeReady(n) ||
		old.Labels[corev1.LabelTopologyZone] != n.Labels[corev1.LabelTopologyZone] {
		c.loop.Add(topologyKey)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
