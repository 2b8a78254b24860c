package replicaset

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
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/expectations"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podcontrol"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// config is everything newController needs.
type config struct {
	// metrics is the registry of the loops' counters (descriptor.Context.Metrics).
	metrics  prometheus.Registerer
	name     string // workqueue name
	kind     kind
	client   kubernetes.Interface
	pods     coreinformers.PodInformer
	recorder record.EventRecorder
	workers  int
	// burst caps creates and deletes per sync. Default: burstReplicas.
	burst int
	// clock: nil means the real clock.
	clock clock.Clock
	// terminatingReplicas: report status.terminatingReplicas (the kind
	// must have the field).
	terminatingReplicas bool
	// deletionCost: honour controller.kubernetes.io/pod-deletion-cost.
	deletionCost bool
	// log is for event handlers, which have no context.
	log logr.Logger
}

// controller syncs objects of one kind with their pods.
type controller struct {
	kind     kind
	kindName string
	pods     podcontrol.Interface
	recorder record.EventRecorder
	exp      *expectations.Expectations
	clock    clock.Clock
	log      logr.Logger

	podLister   corelisters.PodLister
	podIndexer  cache.Indexer
	ownerIndex  cache.Indexer
	synced      []cache.InformerSynced
	loop        *workloop.Loop
	workers     int
	burst       int
	terminating bool
	cost        bool

	// enqueueAfter is loop.AddAfter; tests replace it to observe requeues.
	enqueueAfter func(key string, d time.Duration)
}

// newController registers event handlers and indexes on the informers and
// returns the controller. It starts nothing.
func newController(cfg config) (*controller, error) {
	pc, err := podcontrol.New(cfg.client, cfg.recorder)
	if err != nil {
		return nil, err
	}
	if cfg.workers < 1 {
		return nil, fmt.Errorf("workers must be at least 1, got %d", cfg.workers)
	}
	if cfg.clock == nil {
		cfg.clock = clock.RealClock{}
	}
	if cfg.burst < 1 {
		cfg.burst = burstReplicas
	}
	var c *controller
	// As KCM 1.36+ does, a pod created for an owner holds the owner's key
	// until the pod informer has delivered it.
	pc.OnCreate = func(p *corev1.Pod) {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			c.loop.Wrote(p.Namespace+"/"+ref.Name, p)
		}
	}
	c = &controller{
		kind:        cfg.kind,
		kindName:    cfg.kind.gvk().Kind,
		pods:        pc,
		recorder:    cfg.recorder,
		exp:         expectations.New(cfg.clock),
		clock:       cfg.clock,
		log:         cfg.log,
		workers:     cfg.workers,
		burst:       cfg.burst,
		terminating: cfg.terminatingReplicas && cfg.kind.hasTerminatingReplicas(),
		cost:        cfg.deletionCost,
	}
	owners := cfg.kind.informer()
	if err := index.AddByControllerUID(owners); err != nil {
		return nil, err
	}
	podInf := cfg.pods.Informer()
	if err := index.AddPodsByController(podInf); err != nil {
		return nil, err
	}
	// Everything the handlers use exists before they are registered: an
	// informer that is already running (warm standby) calls them at once.
	c.ownerIndex = owners.GetIndexer()
	c.podIndexer = podInf.GetIndexer()
	c.podLister = cfg.pods.Lister()
	c.synced = []cache.InformerSynced{owners.HasSynced, podInf.HasSynced}
	// The queue exists from here on; release it if construction fails.
	c.loop = workloop.New(cfg.name, c.sync, workloop.Options{Metrics: cfg.metrics})
	c.enqueueAfter = c.loop.AddAfter
	// Not Loop.Watch: the handlers keep KCM's expectations and map pods to
	// their owner through the cache (an orphan to every owner that selects
	// it); they feed the staleness guard themselves (ObserveAdd, Observe,
	// ObserveDelete).
	if _, err := owners.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    c.addOwner,
		UpdateFunc: c.updateOwner,
		DeleteFunc: c.deleteOwner,
	}); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	// Not Loop.Watch: see the owner handler above (expectations, Observe).
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    c.addPodUnlessListed,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	}); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then syncs with the configured number of
// workers until ctx is done. It releases the queue in every case.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting workers", "kind", c.kindName, "workers", c.workers)
	defer log.Info("Workers stopped", "kind", c.kindName)
	c.loop.WaitFor(c.synced...)
	return c.loop.RunWorkers(ctx, c.workers)
}

// Event handlers. They never change the objects they are given; they only
// turn them into keys and, as upstream does, record observed creations and
// deletions in the expectations.

func (c *controller) enqueue(rs *appsv1.ReplicaSet) {
	c.loop.Add(rs.Namespace + "/" + rs.Name)
}

func (c *controller) addOwner(obj any, isInInitialList bool) {
	c.loop.ObserveAdd(obj, isInInitialList)
	if rs, ok := c.kind.view(obj); ok {
		c.enqueue(rs)
	}
}

func (c *controller) updateOwner(oldObj, newObj any) {
	old, ok1 := c.kind.view(oldObj)
	cur, ok2 := c.kind.view(newObj)
	if !ok1 || !ok2 {
		return
	}
	c.loop.Observe(newObj)
	if old.UID != cur.UID {
		// Deleted and recreated between two events: forget the old one.
		c.deleteOwner(
			cache.DeletedFinalStateUnknown{Key: old.Namespace + "/" + old.Name, Obj: oldObj},
		)
	}
	// Every update, resyncs included, is synced: a sync whose creates all
	// failed gets retried this way, and a sync with unmet expectations is
	// cheap.
	c.enqueue(cur)
}

func (c *controller) deleteOwner(obj any) {
	c.loop.ObserveDelete(obj)
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	rs, ok := c.kind.view(obj)
	if !ok {
		c.log.Error(
			errors.New("unexpected object"),
			"Ignoring a delete event",
			"kind",
			c.kindName,
			"type",
			fmt.Sprintf("%T", obj),
		)
		return
	}
	key := rs.Namespace + "/" + rs.Name
	c.exp.Delete(key)
	c.loop.Add(key)
}

// resolve returns the owner that ref names, from the cache, if it is of
// this controller's kind and has the same UID.
func (c *controller) resolve(namespace string, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	rs, _ := ownership.Owner(ref, c.kindName, func(name string) (*appsv1.ReplicaSet, error) {
		return c.kind.get(namespace, name)
	})
	return rs
}

// ownersSelecting returns the owners whose selector matches an orphan pod.
func (c *controller) ownersSelecting(p *corev1.Pod) []*appsv1.ReplicaSet {
	if len(p.Labels) == 0 {
		return nil
	}
	all, err := c.kind.list(p.Namespace)
	if err != nil {
		return nil
	}
	var out []*appsv1.ReplicaSet
	for _, rs := range all {
		sel, err := selectorOf(rs)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		out = append(out, rs)
	}
	if len(out) > 1 {
		c.log.Info(
			"More than one object selects a pod; only one can adopt it",
			"kind",
			c.kindName,
			"pod",
			podKey(p),
			"labels",
			p.Labels,
		)
	}
	return out
}

// addPodUnlessListed skips the pods of the informer's initial list (or of
// the replay a running informer gives a new handler, as at a warm standby
// takeover): every owner is enqueued by its own initial list and its sync
// reads its pods from the cache, while expectations and the staleness
// guard are empty in a new term. A pod could only enqueue an owner that is
// queued already; with 50,000 pods that is 50,000 handler calls less on
// the way to the first sync.
func (c *controller) addPodUnlessListed(obj any, isInInitialList bool) {
	if !isInInitialList {
		c.addPod(obj)
	}
}

func (c *controller) addPod(obj any) {
	c.loop.Observe(obj)
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if p.DeletionTimestamp != nil {
		// Seen for the first time already terminating (after a restart,
		// say): that is a deletion to observe, not a creation.
		c.deletePod(p)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		rs := c.resolve(p.Namespace, ref)
		if rs == nil {
			return
		}
		key := rs.Namespace + "/" + rs.Name
		c.exp.CreationObserved(key)
		c.loop.Add(key)
		return
	}
	// An orphan: wake everyone who might adopt it. No creation is
	// observed; nobody created an orphan.
	for _, rs := range c.ownersSelecting(p) {
		c.enqueue(rs)
	}
}

func (c *controller) updatePod(oldObj, newObj any) {
	c.loop.Observe(newObj)
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || cur.ResourceVersion == old.ResourceVersion {
		return // a resync: nothing changed
	}
	labelsChanged := !equality.Semantic.DeepEqual(old.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// Graceful deletion began: count the pod as gone now rather than
		// when the kubelet finishes, so a replacement starts at once.
		c.deletePod(cur)
		if labelsChanged {
			c.deletePod(old)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !equality.Semantic.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if rs := c.resolve(old.Namespace, oldRef); rs != nil {
			c.enqueue(rs)
		}
	}
	if curRef != nil {
		rs := c.resolve(cur.Namespace, curRef)
		if rs == nil {
			return
		}
		c.enqueue(rs)
		if !podstate.IsReady(old) && podstate.IsReady(cur) && rs.Spec.MinReadySeconds > 0 {
			// It becomes available minReadySeconds from now; nothing else
			// will tell us.
			c.enqueueAfter(
				rs.Namespace+"/"+rs.Name,
				time.Duration(rs.Spec.MinReadySeconds)*time.Second,
			)
		}
		return
	}
	if labelsChanged || refChanged {
		for _, rs := range c.ownersSelecting(cur) {
			c.enqueue(rs)
		}
	}
}

func (c *controller) deletePod(obj any) {
	c.loop.ObserveDelete(obj)
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
	if ref == nil {
		return // nobody waits for an orphan's deletion
	}
	rs := c.resolve(p.Namespace, ref)
	if rs == nil {
		return
	}
	key := rs.Namespace + "/" + rs.Name
	c.exp.DeletionObserved(key, podKey(p))
	c.loop.Add(key)
}
