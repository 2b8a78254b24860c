package deployment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// maxRetries drops a key after this many consecutive failures (KCM's 15).
const maxRetries = 15

var deploymentKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// config is everything newController needs.
type config struct {
	// metrics is the registry of the loops' counters (descriptor.Context.Metrics).
	metrics     prometheus.Registerer
	name        string // workqueue name
	client      kubernetes.Interface
	deployments appsinformers.DeploymentInformer
	replicaSets appsinformers.ReplicaSetInformer
	pods        coreinformers.PodInformer
	recorder    record.EventRecorder
	workers     int
	// clock: nil means the real clock.
	clock clock.WithTicker
	// terminatingReplicas: report status.terminatingReplicas.
	terminatingReplicas bool
	// log is for event handlers, which have no context.
	log logr.Logger
}

// controller syncs Deployments with their ReplicaSets.
type controller struct {
	client      kubernetes.Interface
	recorder    record.EventRecorder
	clock       clock.Clock
	log         logr.Logger
	dLister     appslisters.DeploymentLister
	rsLister    appslisters.ReplicaSetLister
	podIndexer  cache.Indexer
	synced      []cache.InformerSynced
	loop        *workloop.Loop
	workers     int
	terminating bool

	// enqueueKey, enqueueAfter and enqueueRateLimited are the loop's;
	// tests replace them to observe (re)queues.
	enqueueKey         func(key string)
	enqueueAfter       func(key string, d time.Duration)
	enqueueRateLimited func(key string)
}

// newController registers event handlers and an index on the informers and
// returns the controller. It starts nothing.
func newController(cfg config) (*controller, error) {
	if cfg.workers < 1 {
		return nil, fmt.Errorf("workers must be at least 1, got %d", cfg.workers)
	}
	if cfg.clock == nil {
		cfg.clock = clock.RealClock{}
	}
	if cfg.log.GetSink() == nil {
		cfg.log = logr.Discard()
	}
	c := &controller{
		client:      cfg.client,
		recorder:    cfg.recorder,
		clock:       cfg.clock,
		log:         cfg.log,
		workers:     cfg.workers,
		terminating: cfg.terminatingReplicas,
	}
	dInf, rsInf, podInf := cfg.deployments.Informer(), cfg.replicaSets.Informer(), cfg.pods.Informer()
	if err := index.AddPodsByController(podInf); err != nil {
		return nil, err
	}
	c.dLister = cfg.deployments.Lister()
	c.rsLister = cfg.replicaSets.Lister()
	c.podIndexer = podInf.GetIndexer()
	// The queue exists before any handler is registered: a running
	// informer (warm standby) calls a new handler at once.
	c.loop = workloop.New(cfg.name, c.sync, workloop.Options{
		MaxRetries: maxRetries, Clock: cfg.clock, Metrics: cfg.metrics})
	c.enqueueKey = c.loop.Add
	c.enqueueAfter = c.loop.AddAfter
	c.enqueueRateLimited = c.loop.AddRateLimited
	regs := make([]cache.InformerSynced, 0, 3)
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{dInf, cache.ResourceEventHandlerDetailedFuncs{AddFunc: c.addDeployment,
			UpdateFunc: c.updateDeployment, DeleteFunc: c.deleteDeployment}},
		{rsInf, cache.ResourceEventHandlerDetailedFuncs{AddFunc: c.addReplicaSet,
			UpdateFunc: c.updateReplicaSet, DeleteFunc: c.deleteReplicaSet}},
		{podInf, cache.ResourceEventHandlerFuncs{DeleteFunc: c.deletePod}},
	} {
		// Not Loop.Watch: ReplicaSets and pods map to their Deployment through the
		// cache (an orphan to every Deployment that selects it); the handlers
		// feed the staleness guard themselves (ObserveAdd, Observe, ObserveDelete).
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			c.loop.ShutDown()
			return nil, err
		}
		regs = append(regs, reg.HasSynced)
	}
	c.synced = regs
	return c, nil
}

// Run waits for the caches, then syncs Deployments with the configured
// number of workers until ctx is done. It releases the queue in every case.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting workers", "workers", c.workers)
	defer log.Info("Workers stopped")
	c.loop.WaitFor(c.synced...)
	return c.loop.RunWorkers(ctx, c.workers)
}

func keyOf(d *appsv1.Deployment) string { return d.Namespace + "/" + d.Name }

func (c *controller) enqueue(d *appsv1.Deployment) { c.enqueueKey(keyOf(d)) }

// Event handlers: they only turn objects into keys (and feed the staleness
// guard); objects from caches are never modified.

func (c *controller) addDeployment(obj any, isInInitialList bool) {
	c.loop.ObserveAdd(obj, isInInitialList)
	if d, ok := obj.(*appsv1.Deployment); ok {
		c.enqueue(d)
	}
}

func (c *controller) updateDeployment(_, obj any) { c.addDeployment(obj, false) }

func (c *controller) deleteDeployment(obj any) {
	c.loop.ObserveDelete(obj)
	if d, ok := workloop.Object[*appsv1.Deployment](obj); ok {
		c.enqueue(d)
	}
}

// resolve returns the Deployment ref names, from the cache, if it has the
// same UID.
func (c *controller) resolve(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	d, _ := ownership.Owner(ref, deploymentKind.Kind, c.dLister.Deployments(namespace).Get)
	return d
}

// selecting returns the Deployments whose selector matches an orphan
// ReplicaSet's labels. An empty selector matches nothing here.
func (c *controller) selecting(rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	if len(rs.Labels) == 0 {
		return nil
	}
	all, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	out := ownership.Selecting(all,
		func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }, rs.Labels)
	if len(out) > 1 {
		c.log.V(4).
			Info("More than one Deployment selects a ReplicaSet; only one can adopt it",
				"replicaSet", rs.Namespace+"/"+rs.Name, "labels", rs.Labels)
	}
	return out
}

func (c *controller) addReplicaSet(obj any, isInInitialList bool) {
	c.loop.ObserveAdd(obj, isInInitialList)
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if rs.DeletionTimestamp != nil {
		c.deleteReplicaSet(rs)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.resolve(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.selecting(rs) {
		c.enqueue(d)
	}
}

func (c *controller) updateReplicaSet(oldObj, newObj any) {
	c.loop.Observe(newObj)
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	cur, ok2 := newObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return // a resync
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !equality.Semantic.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if d := c.resolve(old.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	if curRef != nil {
		if d := c.resolve(cur.Namespace, curRef); d != nil {
			c.enqueue(d)
		}
		return
	}
	if refChanged || !equality.Semantic.DeepEqual(old.Labels, cur.Labels) {
		for _, d := range c.selecting(cur) {
			c.enqueue(d)
		}
	}
}

func (c *controller) deleteReplicaSet(obj any) {
	c.loop.ObserveDelete(obj)
	rs, ok := workloop.Object[*appsv1.ReplicaSet](obj)
	if !ok {
		c.log.Error(
			errors.New("unexpected object"),
			"Ignoring a ReplicaSet delete event",
			"type",
			fmt.Sprintf("%T", obj),
		)
		return
	}
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return
	}
	if d := c.resolve(rs.Namespace, ref); d != nil {
		c.enqueue(d)
	}
}

// deletePod wakes a Recreate Deployment whose pod went away: its new
// ReplicaSet waits until the old pods are gone.
func (c *controller) deletePod(obj any) {
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
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(p.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	rsRef := metav1.GetControllerOfNoCopy(rs)
	if rsRef == nil {
		return
	}
	if d := c.resolve(rs.Namespace, rsRef); d != nil &&
		d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}
