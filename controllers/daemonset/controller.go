package daemonset

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/expectations"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/passes"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podcontrol"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// Failed-pod back-off, as KCM configures it: 1s doubling up to 15m per
// DaemonSet, generation and node; entries idle for twice the maximum are
// collected every backoffGCInterval.
const (
	failedPodBackoffInitial = time.Second
	failedPodBackoffMax     = 15 * time.Minute
	backoffGCInterval       = time.Minute
)

var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// config is everything newController needs.
type config struct {
	// metrics is the registry of the loops' counters (descriptor.Context.Metrics).
	metrics    prometheus.Registerer
	name       string // workqueue name
	client     kubernetes.Interface
	daemonSets appsinformers.DaemonSetInformer
	revisions  appsinformers.ControllerRevisionInformer
	pods       coreinformers.PodInformer
	nodes      coreinformers.NodeInformer
	// recorder: nil drops events.
	recorder record.EventRecorder
	workers  int
	// burst caps creates and deletes per sync. Default: burstReplicas.
	burst int
	// clock: nil means the real clock.
	clock clock.WithTicker
	// staleGuard: hold a key until the informers caught up with its writes.
	staleGuard bool
	// comparisonTaints: the TaintTolerationComparisonOperators gate.
	comparisonTaints bool
	// log is for event handlers, which have no context.
	log logr.Logger
}

// controller syncs DaemonSets with their pods and ControllerRevisions.
type controller struct {
	client   kubernetes.Interface
	pods     podcontrol.Interface
	recorder record.EventRecorder
	exp      *expectations.Expectations
	clock    clock.WithTicker
	backoff  *flowcontrol.Backoff
	log      logr.Logger

	dsLister   appslisters.DaemonSetLister
	revLister  appslisters.ControllerRevisionLister
	podLister  corelisters.PodLister
	podIndexer cache.Indexer
	nodeLister corelisters.NodeLister
	synced     []cache.InformerSynced

	loop             *workloop.Loop
	workers          int
	burst            int
	staleGuard       bool
	comparisonTaints bool

	// enqueueAfter is loop.AddAfter; tests replace it to observe requeues.
	enqueueAfter func(key string, d time.Duration)
}

// newController registers event handlers and indexes on the informers and
// returns the controller. It starts nothing.
func newController(cfg config) (*controller, error) {
	if cfg.workers < 1 {
		return nil, fmt.Errorf("workers must be at least 1, got %d", cfg.workers)
	}
	pc, err := podcontrol.New(cfg.client, cfg.recorder)
	if err != nil {
		return nil, err
	}
	if cfg.clock == nil {
		cfg.clock = clock.RealClock{}
	}
	if cfg.burst < 1 {
		cfg.burst = burstReplicas
	}
	c := &controller{
		client:   cfg.client,
		pods:     pc,
		recorder: cfg.recorder,
		exp:      expectations.New(cfg.clock),
		clock:    cfg.clock,
		backoff: flowcontrol.NewFakeBackOff(
			failedPodBackoffInitial,
			failedPodBackoffMax,
			cfg.clock,
		),
		log:              cfg.log,
		workers:          cfg.workers,
		burst:            cfg.burst,
		staleGuard:       cfg.staleGuard,
		comparisonTaints: cfg.comparisonTaints,
	}
	if c.staleGuard {
		// As KCM does with StaleControllerConsistencyDaemonSet, a pod
		// created for a DaemonSet holds its key until the pod informer has
		// delivered it.
		pc.OnCreate = func(p *corev1.Pod) {
			if ref := metav1.GetControllerOfNoCopy(p); ref != nil &&
				ref.Kind == controllerKind.Kind {
				c.loop.Wrote(p.Namespace+"/"+ref.Name, p)
			}
		}
	}
	dsInf := cfg.daemonSets.Informer()
	revInf := cfg.revisions.Informer()
	podInf := cfg.pods.Informer()
	nodeInf := cfg.nodes.Informer()
	if err := index.AddPodsByController(podInf); err != nil {
		return nil, err
	}
	if err := index.AddPodsByNode(podInf); err != nil {
		return nil, err
	}
	// Everything the handlers use exists before they are registered: an
	// informer that is already running (warm standby) calls them at once.
	c.dsLister = cfg.daemonSets.Lister()
	c.revLister = cfg.revisions.Lister()
	c.podLister = cfg.pods.Lister()
	c.podIndexer = podInf.GetIndexer()
	c.nodeLister = cfg.nodes.Lister()
	c.synced = []cache.InformerSynced{
		podInf.HasSynced,
		nodeInf.HasSynced,
		revInf.HasSynced,
		dsInf.HasSynced,
	}
	c.loop = workloop.New(
		cfg.name,
		c.sync,
		workloop.Options{Clock: cfg.clock, Metrics: cfg.metrics},
	)
	c.enqueueAfter = c.loop.AddAfter
	for _, reg := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{dsInf, cache.ResourceEventHandlerDetailedFuncs{AddFunc: c.addDaemonSet,
			UpdateFunc: c.updateDaemonSet, DeleteFunc: c.deleteDaemonSet}},
		{revInf, cache.ResourceEventHandlerFuncs{AddFunc: c.addRevision,
			UpdateFunc: c.updateRevision, DeleteFunc: c.deleteRevision}},
		{podInf, cache.ResourceEventHandlerDetailedFuncs{AddFunc: c.addPodUnlessListed,
			UpdateFunc: c.updatePod, DeleteFunc: c.deletePod}},
		{nodeInf, cache.ResourceEventHandlerDetailedFuncs{AddFunc: c.addNode, UpdateFunc: c.updateNode}},
	} {
		// Not Loop.Watch: the handlers keep KCM's expectations and map pods and
		// nodes to daemon sets through the cache; they feed the staleness guard
		// themselves (ObserveAdd, Observe, ObserveDelete).
		if _, err := reg.inf.AddEventHandler(reg.h); err != nil {
			c.loop.ShutDown()
			return nil, err
		}
	}
	return c, nil
}

// Run waits for the caches, then syncs with the configured number of
// workers until ctx is done, collecting idle back-off entries meanwhile.
// It releases the queue and every goroutine it started in every case.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting daemon sets controller", "workers", c.workers)
	defer log.Info("Shutting down daemon sets controller")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	// KCM's wait.Until of the back-off's GC: at once, then an interval
	// after each.
	wg.Go(func() {
		passes.Every(ctx, c.clock, backoffGCInterval, func(context.Context) { c.backoff.GC() })
	})
	c.loop.WaitFor(c.synced...)
	err := c.loop.RunWorkers(ctx, c.workers)
	cancel()
	return err
}

func keyOf(ds *appsv1.DaemonSet) string { return ds.Namespace + "/" + ds.Name }

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// Event handlers. They never change the objects they are given; they turn
// them into keys and, as upstream does, record observed creations and
// deletions in the expectations.

func (c *controller) addDaemonSet(obj any, isInInitialList bool) {
	c.loop.ObserveAdd(obj, isInInitialList)
	if ds, ok := obj.(*appsv1.DaemonSet); ok {
		c.loop.Add(keyOf(ds))
	}
}

func (c *controller) updateDaemonSet(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.DaemonSet)
	cur, ok2 := newObj.(*appsv1.DaemonSet)
	if !ok1 || !ok2 {
		return
	}
	c.loop.Observe(newObj)
	if old.UID != cur.UID {
		// Deleted and recreated between two events: forget the old one.
		c.deleteDaemonSet(cache.DeletedFinalStateUnknown{Key: keyOf(old), Obj: old})
	}
	c.loop.Add(keyOf(cur))
}

func (c *controller) deleteDaemonSet(obj any) {
	c.loop.ObserveDelete(obj)
	ds, ok := workloop.Object[*appsv1.DaemonSet](obj)
	if !ok {
		c.log.Error(
			errors.New("unexpected object"),
			"Ignoring a DaemonSet delete event",
			"type",
			fmt.Sprintf("%T", obj),
		)
		return
	}
	key := keyOf(ds)
	c.forgetExpectations(key)
	c.loop.Add(key)
}

// resolve returns the DaemonSet ref names, from the cache, if it is one and
// has the same UID.
func (c *controller) resolve(namespace string, ref *metav1.OwnerReference) *appsv1.DaemonSet {
	ds, _ := ownership.Owner(ref, controllerKind.Kind, c.dsLister.DaemonSets(namespace).Get)
	return ds
}

// selecting returns the DaemonSets of namespace whose selector matches
// lbls (an orphan's labels).
func (c *controller) selecting(namespace string, lbls map[string]string) []*appsv1.DaemonSet {
	if len(lbls) == 0 {
		return nil
	}
	all, err := c.dsLister.DaemonSets(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	out := ownership.Selecting(all,
		func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector }, lbls)
	if len(out) > 1 {
		c.log.Info(
			"More than one DaemonSet selects an object; only one can adopt it",
			"namespace",
			namespace,
			"labels",
			lbls,
		)
	}
	return out
}

func (c *controller) addRevision(obj any) {
	cr, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return
	}
	if cr.DeletionTimestamp != nil {
		c.deleteRevision(cr)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(cr); ref != nil {
		// Its DaemonSet needs no sync for it: it made it.
		return
	}
	for _, ds := range c.selecting(cr.Namespace, cr.Labels) {
		c.loop.Add(keyOf(ds))
	}
}

func (c *controller) updateRevision(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ControllerRevision)
	cur, ok2 := newObj.(*appsv1.ControllerRevision)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !equality.Semantic.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if ds := c.resolve(old.Namespace, oldRef); ds != nil {
			c.loop.Add(keyOf(ds))
		}
	}
	if curRef != nil {
		if ds := c.resolve(cur.Namespace, curRef); ds != nil {
			c.loop.Add(keyOf(ds))
		}
		return
	}
	if refChanged || !equality.Semantic.DeepEqual(old.Labels, cur.Labels) {
		for _, ds := range c.selecting(cur.Namespace, cur.Labels) {
			c.loop.Add(keyOf(ds))
		}
	}
}

func (c *controller) deleteRevision(obj any) {
	cr, ok := workloop.Object[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(cr); ref != nil {
		if ds := c.resolve(cr.Namespace, ref); ds != nil {
			c.loop.Add(keyOf(ds))
		}
	}
}

// addPodUnlessListed skips the pods of the informer's initial list: every
// DaemonSet is enqueued by its own initial list, and expectations are
// empty in a new term. Nor does the staleness guard see them: no write of
// this term can be among them (as workloop.Loop.Watch).
func (c *controller) addPodUnlessListed(obj any, isInInitialList bool) {
	if isInInitialList {
		return
	}
	c.addPod(obj)
}

func (c *controller) addPod(obj any) {
	c.loop.Observe(obj)
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if p.DeletionTimestamp != nil {
		// First seen already terminating: a deletion, not a creation.
		c.deletePod(p)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		ds := c.resolve(p.Namespace, ref)
		if ds == nil {
			return
		}
		key := keyOf(ds)
		c.exp.CreationObserved(createKey(key))
		c.loop.Add(key)
		return
	}
	for _, ds := range c.selecting(p.Namespace, p.Labels) {
		c.loop.Add(keyOf(ds))
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
		c.deletePod(cur)
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !equality.Semantic.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if ds := c.resolve(old.Namespace, oldRef); ds != nil {
			c.loop.Add(keyOf(ds))
		}
	}
	if curRef != nil {
		ds := c.resolve(cur.Namespace, curRef)
		if ds == nil {
			return
		}
		c.loop.Add(keyOf(ds))
		if !podstate.IsReady(old) && podstate.IsReady(cur) && ds.Spec.MinReadySeconds > 0 {
			// It becomes available minReadySeconds from now; a second more
			// absorbs the skew of delayed enqueues, as in KCM.
			c.enqueueAfter(
				keyOf(ds),
				time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second,
			)
		}
		return
	}
	if refChanged || !equality.Semantic.DeepEqual(old.Labels, cur.Labels) {
		for _, ds := range c.selecting(cur.Namespace, cur.Labels) {
			c.loop.Add(keyOf(ds))
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
		return
	}
	ds := c.resolve(p.Namespace, ref)
	if ds == nil {
		return
	}
	key := keyOf(ds)
	c.exp.DeletionObserved(deleteKey(key), podKey(p))
	c.loop.Add(key)
}

func (c *controller) addNode(obj any, isInInitialList bool) {
	if isInInitialList {
		return // every DaemonSet is synced after the initial lists anyway
	}
	if n, ok := obj.(*corev1.Node); ok {
		c.nodeChanged(n)
	}
}

// updateNode reacts only to changed labels or taints, the only node
// fields eligibility reads (KCM's rule).
func (c *controller) updateNode(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Node)
	cur, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if equality.Semantic.DeepEqual(old.Labels, cur.Labels) &&
		equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) {
		return
	}
	c.nodeChanged(cur)
}

// nodeChanged enqueues the DaemonSets whose pods on node must change: it
// should run one and has none, has one it should not keep, or has one
// while its status counts misscheduled pods (which may be this one, now
// eligible again).
func (c *controller) nodeChanged(node *corev1.Node) {
	all, err := c.dsLister.List(labels.Everything())
	if err != nil || len(all) == 0 {
		return
	}
	onNode, err := c.podIndexer.ByIndex(index.PodsByNode, node.Name)
	if err != nil {
		return
	}
	scheduled := map[string]bool{}
	for _, o := range onNode {
		p, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Kind == controllerKind.Kind {
			scheduled[p.Namespace+"/"+ref.Name] = true
		}
	}
	for _, ds := range all {
		key := keyOf(ds)
		e := newEligibility(ds, c.comparisonTaints)
		shouldRun, shouldContinue := e.check(node)
		has := scheduled[key]
		if (shouldRun && !has) || (!shouldContinue && has) ||
			(has && ds.Status.NumberMisscheduled > 0) {
			c.loop.Add(key)
		}
	}
}

// Expectations are kept under two keys per DaemonSet, so that one sync can
// expect creations and deletions at once.
func createKey(key string) string { return key + "#create" }
func deleteKey(key string) string { return key + "#delete" }

func (c *controller) expectationsSatisfied(key string) bool {
	return c.exp.Satisfied(createKey(key)) && c.exp.Satisfied(deleteKey(key))
}

func (c *controller) forgetExpectations(key string) {
	c.exp.Delete(createKey(key))
	c.exp.Delete(deleteKey(key))
}
