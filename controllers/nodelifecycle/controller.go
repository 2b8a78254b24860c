package nodelifecycle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// KCM's worker counts and periods.
const (
	nodeWorkers   = 8 // NoSchedule taints and labels; also node-health parallelism
	podWorkers    = 4 // pods newly bound to a node that is not Ready
	evictionEvery = 100 * time.Millisecond
	// healthAttempts bounds the tries of one node's health update in a pass.
	healthAttempts = 5
	retryWait      = 20 * time.Millisecond
)

// controller is KCM's node lifecycle controller.
type controller struct {
	o        Options
	client   kubernetes.Interface
	nodes    corelisters.NodeLister
	leases   coordlisters.LeaseLister
	pods     corelisters.PodLister
	podIndex cache.Indexer
	recorder record.EventRecorder
	metrics  *metrics
	clock    clock.WithTicker
	synced   []cache.InformerSynced
	// breaker is the NodeControllerLeaseCircuitBreaker gate.
	breaker     bool
	consistency *leaseConsistency
	retryWait   time.Duration

	nodeLoop *workloop.Loop // NoSchedule taints and labels, by node name
	podLoop  *workloop.Loop // pods bound to a node, by namespace/name

	health *healthMap

	// knownNodes is the monitor pass's own (one goroutine).
	knownNodes map[string]*corev1.Node
	// zoneMu guards the zone queues and states.
	zoneMu     sync.Mutex
	zoneQueues map[string]*zoneQueue
	zoneStates map[string]zoneState

	nodesToRetry sync.Map
}

func newFromContext(ctx context.Context, cc descriptor.Context,
	o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	m, err := metricsOn(cc.Metrics)
	if err != nil {
		return nil, err
	}
	nodeInf := cc.InformerFactory.Core().V1().Nodes()
	leaseInf := cc.InformerFactory.Coordination().V1().Leases()
	podInf := cc.InformerFactory.Core().V1().Pods()
	recorder := cc.EventRecorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	c := &controller{
		o: o, client: client, metrics: m, recorder: recorder, clock: o.Clock,
		nodes: nodeInf.Lister(), leases: leaseInf.Lister(), pods: podInf.Lister(),
		podIndex: podInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{nodeInf.Informer().HasSynced,
			leaseInf.Informer().HasSynced, podInf.Informer().HasSynced},
		breaker:     gate.Enabled(cc.FeatureGate, FeatureNodeControllerLeaseCircuitBreaker, true),
		consistency: newLeaseConsistency(leaseInf.Informer().GetStore()),
		retryWait:   retryWait,
		health:      newHealthMap(),
		knownNodes:  map[string]*corev1.Node{},
		zoneQueues:  map[string]*zoneQueue{},
		zoneStates:  map[string]zoneState{},
	}
	if err := index.AddPodsByNode(podInf.Informer()); err != nil {
		return nil, err
	}
	// The loops exist before their handlers: a running informer (warm
	// standby) calls them at once.
	c.nodeLoop = workloop.New(cc.Name, c.syncNode,
		workloop.Options{Metrics: cc.Metrics, Clock: o.Clock})
	c.podLoop = workloop.New(cc.Name+"-pods", c.syncPod,
		workloop.Options{Metrics: cc.Metrics, Clock: o.Clock})
	if err := errors.Join(
		c.nodeLoop.Watch(nodeInf.Informer(), workloop.EnqueueKey()),
		c.podLoop.Watch(podInf.Informer(), workloop.EnqueueKey(), newlyBound),
	); err != nil {
		c.shutDown()
		return nil, err
	}
	return c, nil
}

func (c *controller) shutDown() {
	c.nodeLoop.ShutDown()
	c.podLoop.ShutDown()
}

// newlyBound passes pods that got a node: added bound, or whose node
// changed.
func newlyBound(old, obj any) bool {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return false
	}
	prev, ok := old.(*corev1.Pod)
	return !ok || prev.Spec.NodeName != p.Spec.NodeName
}

// Run waits for the caches, then runs the taint and pod workers, the
// NoExecute tainting pass every 100ms and the health pass every
// NodeMonitorPeriod, until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.shutDown()
		return nil
	}
	log.Info("Starting node controller")
	defer log.Info("Shutting down node controller")
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = c.nodeLoop.RunWorkers(ctx, nodeWorkers) })
	wg.Go(func() { errs[1] = c.podLoop.RunWorkers(ctx, podWorkers) })
	wg.Go(func() { c.every(ctx, evictionEvery, c.noExecuteTaintingPass) })
	wg.Go(func() {
		c.every(ctx, c.o.NodeMonitorPeriod, func(ctx context.Context) {
			if err := c.monitorNodeHealth(ctx); err != nil {
				log.Error(err, "Error monitoring node health")
			}
		})
	})
	wg.Wait()
	return errors.Join(errs...)
}

// every calls f, then again period after each call returns, until ctx is
// done.
func (c *controller) every(ctx context.Context, period time.Duration,
	f func(context.Context)) {
	for ctx.Err() == nil {
		f(ctx)
		t := c.clock.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}
