package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	endpointslicerec "k8s.io/endpointslice"
	esutil "k8s.io/endpointslice/util"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// KCM's retry policy for this controller: an Endpoints is dropped after 15
// failed syncs in a row; retries back off from 1s to 100s, and all
// retries together are held to 10 per second (bursts of 100).
const (
	maxRetries = 15
	minBackOff = time.Second
	maxBackOff = 100 * time.Second
)

// controller mirrors the Endpoints of Services without a selector into
// EndpointSlices; its keys are the Endpoints' (and Services')
// namespace/name.
type controller struct {
	client       kubernetes.Interface
	endpoints    corelisters.EndpointsLister
	services     corelisters.ServiceLister
	slices       discoverylisters.EndpointSliceLister
	recorder     record.EventRecorder
	tracker      *esutil.EndpointSliceTracker
	maxPerSubset int32
	batch        time.Duration
	workers      int
	loop         *workloop.Loop
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

// newSyncer returns a controller without a loop: what sync needs.
func newSyncer(client kubernetes.Interface, endpoints corelisters.EndpointsLister,
	services corelisters.ServiceLister, slices discoverylisters.EndpointSliceLister,
	recorder record.EventRecorder, o Options) *controller {
	return &controller{
		client:       client,
		endpoints:    endpoints,
		services:     services,
		slices:       slices,
		recorder:     recorder,
		tracker:      esutil.NewEndpointSliceTracker(),
		maxPerSubset: o.MaxEndpointsPerSubset,
		batch:        o.EndpointUpdatesBatchPeriod,
		workers:      int(o.ConcurrentServiceEndpointSyncs),
	}
}

func newController(cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	core := cc.InformerFactory.Core().V1()
	sliceInformer := cc.InformerFactory.Discovery().V1().EndpointSlices()
	c := newSyncer(client, core.Endpoints().Lister(), core.Services().Lister(),
		sliceInformer.Lister(), cc.EventRecorder, o)
	// The loop exists before any handler is registered: a running informer
	// calls a handler at once. On a later failure it is shut down here;
	// otherwise Run releases it.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{
		MaxRetries: maxRetries, RateLimiter: retryLimiter(), Metrics: cc.Metrics})
	c.after = c.loop.AddAfter
	if err := c.loop.Watch(core.Endpoints().Informer(), workloop.EnqueueKey(),
		endpointsToMirror); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	if err := c.loop.Watch(core.Services().Informer(), workloop.EnqueueKey(),
		selectorlessChange); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	// Not Loop.Watch: a mirrored slice queues its Endpoints only when the
	// tracker says it may be stale (ShouldSync).
	reg, err := sliceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.sliceAdded,
		UpdateFunc: c.sliceUpdated,
		DeleteFunc: c.sliceDeleted,
	})
	if err != nil {
		c.loop.ShutDown()
		return nil, fmt.Errorf("endpointslice event handler: %w", err)
	}
	c.loop.WaitFor(reg.HasSynced)
	return c, nil
}

// Run waits for the caches, then mirrors Endpoints until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting EndpointSliceMirroring controller", "workers", c.workers)
	defer log.Info("Shutting down EndpointSliceMirroring controller")
	return c.loop.RunWorkers(ctx, c.workers)
}

// shouldMirror reports whether an Endpoints is mirrored at all: not when
// it carries the skip-mirror label set to "true" (the EndpointSlice
// controller's own Endpoints, or a user's opt-out), nor when it is a
// leader-election record.
func shouldMirror(ep *corev1.Endpoints) bool {
	if ep == nil || ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, election := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !election
}

// endpointsToMirror passes the adds and deletions of Endpoints that are
// mirrored, and the updates of Endpoints that are or were.
func endpointsToMirror(old, obj any) bool {
	ep, _ := obj.(*corev1.Endpoints)
	if shouldMirror(ep) {
		return true
	}
	prev, _ := old.(*corev1.Endpoints)
	return shouldMirror(prev)
}

// selectorlessChange passes the adds and deletions of Services without a
// selector, and the updates that add or remove a Service's selector.
func selectorlessChange(old, obj any) bool {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return false
	}
	if old == nil {
		return svc.Spec.Selector == nil
	}
	prev, ok := old.(*corev1.Service)
	return ok && (prev.Spec.Selector == nil) != (svc.Spec.Selector == nil)
}

func managedByMe(s *discoveryv1.EndpointSlice) bool {
	return s.Labels[discoveryv1.LabelManagedBy] == ManagedBy
}

func (c *controller) sliceAdded(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if ok && managedByMe(s) && c.tracker.ShouldSync(s) {
		c.enqueueEndpointsOf(s)
	}
}

func (c *controller) sliceUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	s, ok2 := obj.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return
	}
	// Relabelling a slice to another Service does not bump its
	// generation: both Endpoints are synced.
	if before, now := old.Labels[discoveryv1.LabelServiceName],
		s.Labels[discoveryv1.LabelServiceName]; before != now {
		c.enqueueEndpointsOf(s)
		c.enqueueEndpointsOf(old)
		return
	}
	if managedByMe(old) != managedByMe(s) || managedByMe(s) && c.tracker.ShouldSync(s) {
		c.enqueueEndpointsOf(s)
	}
}

func (c *controller) sliceDeleted(obj any) {
	s, ok := workloop.Object[*discoveryv1.EndpointSlice](obj)
	if !ok || !managedByMe(s) || !c.tracker.Has(s) {
		return
	}
	// A deletion the controller did not make is repaired.
	if !c.tracker.HandleDeletion(s) {
		c.enqueueEndpointsOf(s)
	}
}

// enqueueEndpointsOf syncs the Endpoints a slice names after the batch
// period.
func (c *controller) enqueueEndpointsOf(s *discoveryv1.EndpointSlice) {
	key, err := endpointslicerec.ServiceControllerKey(s)
	if err != nil {
		return
	}
	c.after(key, c.batch)
}
