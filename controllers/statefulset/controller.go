package statefulset

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// config is everything newController needs.
type config struct {
	name      string // workqueue name
	metrics   prometheus.Registerer
	client    kubernetes.Interface
	sets      appsinformers.StatefulSetInformer
	revisions appsinformers.ControllerRevisionInformer
	pods      coreinformers.PodInformer
	claims    coreinformers.PersistentVolumeClaimInformer
	// recorder: nil drops events.
	recorder record.EventRecorder
	workers  int
	// clock: nil means the real clock.
	clock clock.WithTicker
	// The gates.
	staleGuard, maxUnavailable, semanticRevisions, recreate bool
	// log is for event handlers, which have no context.
	log logr.Logger
}

// controller syncs StatefulSets with their pods, claims and revisions.
type controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	clock    clock.WithTicker
	log      logr.Logger

	setLister   appslisters.StatefulSetLister
	revLister   appslisters.ControllerRevisionLister
	podIndexer  cache.Indexer
	claimLister corelisters.PersistentVolumeClaimLister
	synced      []cache.InformerSynced

	loop    *workloop.Loop
	workers int

	staleGuard, maxUnavailable, semanticRevisions, recreate bool
	equal                                                   equalityCache

	// enqueue and enqueueAfter are loop.Add and loop.AddAfter; tests
	// replace them to observe what the handlers queue.
	enqueue      func(key string)
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
	if cfg.recorder == nil {
		cfg.recorder = &record.FakeRecorder{}
	}
	c := &controller{
		client:            cfg.client,
		recorder:          cfg.recorder,
		clock:             cfg.clock,
		log:               cfg.log,
		workers:           cfg.workers,
		staleGuard:        cfg.staleGuard,
		maxUnavailable:    cfg.maxUnavailable,
		semanticRevisions: cfg.semanticRevisions,
		recreate:          cfg.recreate,
	}
	setInf := cfg.sets.Informer()
	revInf := cfg.revisions.Informer()
	podInf := cfg.pods.Informer()
	claimInf := cfg.claims.Informer()
	if err := index.AddPodsByController(podInf); err != nil {
		return nil, err
	}
	c.setLister = cfg.sets.Lister()
	c.revLister = cfg.revisions.Lister()
	c.podIndexer = podInf.GetIndexer()
	c.claimLister = cfg.claims.Lister()
	c.synced = []cache.InformerSynced{podInf.HasSynced, setInf.HasSynced,
		claimInf.HasSynced, revInf.HasSynced}
	c.loop = workloop.New(cfg.name, c.sync, workloop.Options{Clock: cfg.clock,
		Metrics: cfg.metrics})
	c.enqueue = c.loop.Add
	c.enqueueAfter = c.loop.AddAfter
	// As KCM, only sets and pods enqueue; claims feed the staleness guard.
	for _, reg := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{setInf, cache.ResourceEventHandlerDetailedFuncs{AddFunc: c.addSet,
			UpdateFunc: c.updateSet, DeleteFunc: c.deleteSet}},
		{podInf, cache.ResourceEventHandlerDetailedFuncs{AddFunc: c.addPod,
			UpdateFunc: c.updatePodEvent, DeleteFunc: c.deletePodEvent}},
		{claimInf, cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    c.loop.ObserveAdd,
			UpdateFunc: func(_, obj any) { c.loop.Observe(obj) },
			DeleteFunc: c.loop.ObserveDelete}},
	} {
		// Not Loop.Watch: a pod maps to its set through the cache (an orphan to
		// every set that selects it), and claims only feed the staleness guard;
		// the handlers call Observe, ObserveAdd and ObserveDelete themselves.
		if _, err := reg.inf.AddEventHandler(reg.h); err != nil {
			c.loop.ShutDown()
			return nil, err
		}
	}
	return c, nil
}

// Run waits for the caches, then syncs with the configured number of
// workers until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting stateful set controller", "workers", c.workers)
	defer log.Info("Shutting down statefulset controller")
	c.loop.WaitFor(c.synced...)
	return c.loop.RunWorkers(ctx, c.workers)
}

func keyOf(set *appsv1.StatefulSet) string { return set.Namespace + "/" + set.Name }

func (c *controller) addSet(obj any, isInInitialList bool) {
	c.loop.ObserveAdd(obj, isInInitialList)
	if set, ok := obj.(*appsv1.StatefulSet); ok {
		c.enqueue(keyOf(set))
	}
}

func (c *controller) updateSet(_, obj any) { c.addSet(obj, false) }

func (c *controller) deleteSet(obj any) {
	c.loop.ObserveDelete(obj)
	if set, ok := workloop.Object[*appsv1.StatefulSet](obj); ok {
		c.enqueue(keyOf(set))
	}
}

// resolve returns the StatefulSet ref names, from the cache, if it is one
// and has the same UID.
func (c *controller) resolve(namespace string, ref *metav1.OwnerReference) *appsv1.StatefulSet {
	set, _ := ownership.Owner(ref, controllerKind.Kind, c.setLister.StatefulSets(namespace).Get)
	return set
}

// selecting returns the StatefulSets whose selector matches the orphan p.
func (c *controller) selecting(p *corev1.Pod) []*appsv1.StatefulSet {
	if len(p.Labels) == 0 {
		return nil
	}
	all, err := c.setLister.StatefulSets(p.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	out := ownership.Selecting(all,
		func(set *appsv1.StatefulSet) *metav1.LabelSelector { return set.Spec.Selector }, p.Labels)
	if len(out) > 1 {
		c.log.Info("More than one StatefulSet is selecting pods with same labels",
			"namespace", p.Namespace, "podLabels", p.Labels)
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
		c.deletePodEvent(p)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		if set := c.resolve(p.Namespace, ref); set != nil {
			c.enqueue(keyOf(set))
		}
		return
	}
	for _, set := range c.selecting(p) {
		c.enqueue(keyOf(set))
	}
}

func (c *controller) updatePodEvent(oldObj, newObj any) {
	c.loop.Observe(newObj)
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || cur.ResourceVersion == old.ResourceVersion {
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !equality.Semantic.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if set := c.resolve(old.Namespace, oldRef); set != nil {
			c.enqueue(keyOf(set))
		}
	}
	if curRef != nil {
		set := c.resolve(cur.Namespace, curRef)
		if set == nil {
			return
		}
		c.enqueue(keyOf(set))
		if !podstate.IsReady(old) && podstate.IsReady(cur) && set.Spec.MinReadySeconds > 0 {
			c.enqueueAfter(keyOf(set), time.Duration(set.Spec.MinReadySeconds)*time.Second)
		}
		return
	}
	if refChanged || !equality.Semantic.DeepEqual(old.Labels, cur.Labels) {
		for _, set := range c.selecting(cur) {
			c.enqueue(keyOf(set))
		}
	}
}

func (c *controller) deletePodEvent(obj any) {
	c.loop.ObserveDelete(obj)
	p, ok := workloop.Object[*corev1.Pod](obj)
	if !ok {
		c.log.Error(errors.New("unexpected object"), "Ignoring a pod delete event",
			"type", fmt.Sprintf("%T", obj))
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		if set := c.resolve(p.Namespace, ref); set != nil {
			c.enqueue(keyOf(set))
		}
	}
}

// sync reconciles the StatefulSet key names.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	log := logr.FromContextOrDiscard(ctx)
	set, err := c.setLister.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		log.Info("StatefulSet has been deleted", "key", key)
		return nil
	}
	if err != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		// Not transient: wait for the next change of the set.
		log.Error(err, "Error converting StatefulSet selector", "key", key)
		return nil
	}
	if err := c.adoptOrphanRevisions(ctx, set); err != nil {
		return err
	}
	pods, err := c.claimPods(ctx, set, sel)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	st, err := c.update(ctx, set, pods, now)
	if err != nil {
		return err
	}
	if set.Spec.MinReadySeconds > 0 && st != nil && st.ReadyReplicas != st.AvailableReplicas {
		c.enqueueAfter(key, nextAvailabilityCheck(pods, set.Spec.MinReadySeconds, now,
			c.clock.Now()))
	}
	return nil
}

// nextAvailabilityCheck is when the first ready pod that is not yet
// available becomes available, measured from later; minReadySeconds when
// none is.
func nextAvailabilityCheck(pods []*corev1.Pod, minReady int32, now, later time.Time) time.Duration {
	d := time.Duration(minReady) * time.Second
	var first time.Time
	for _, p := range pods {
		if !podstate.IsReady(p) || podstate.IsAvailable(p, minReady, now) {
			continue
		}
		since := podstate.ReadyTime(p)
		if since.IsZero() {
			continue
		}
		if first.IsZero() || since.Before(first) {
			first = since
		}
	}
	if first.IsZero() {
		return d
	}
	return max(first.Add(d).Sub(later), 0)
}

// recheck reads set from the API server, for adoption: it must still exist
// with the same UID.
func (c *controller) recheck(set *appsv1.StatefulSet) func(context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		fresh, err := c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name,
			metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if fresh.UID != set.UID {
			return nil, fmt.Errorf("original StatefulSet %s/%s is gone: got uid %s, wanted %s",
				set.Namespace, set.Name, fresh.UID, set.UID)
		}
		return fresh, nil
	}
}

// adoptOrphanRevisions makes set the controller of the revisions its
// selector matches that nobody controls.
func (c *controller) adoptOrphanRevisions(ctx context.Context, set *appsv1.StatefulSet) error {
	revs, err := c.listRevisions(set)
	if err != nil {
		return err
	}
	var orphans []*appsv1.ControllerRevision
	for _, r := range revs {
		if metav1.GetControllerOfNoCopy(r) == nil {
			orphans = append(orphans, r)
		}
	}
	if len(orphans) == 0 {
		return nil
	}
	fresh, err := c.recheck(set)(ctx)
	if err == nil && fresh.GetDeletionTimestamp() != nil {
		err = fmt.Errorf("%s/%s has just been deleted at %v", set.Namespace, set.Name,
			fresh.GetDeletionTimestamp())
	}
	if err != nil {
		return fmt.Errorf("can't adopt ControllerRevisions: %w", err)
	}
	for _, r := range orphans {
		patch, err := ownership.AdoptPatch(set, controllerKind, r.UID)
		if err != nil {
			return err
		}
		if _, err := c.client.AppsV1().ControllerRevisions(r.Namespace).Patch(ctx, r.Name,
			types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// claimPods returns the pods set controls, adopting matching orphans whose
// names make them its members and releasing those that stopped matching.
func (c *controller) claimPods(ctx context.Context, set *appsv1.StatefulSet,
	sel labels.Selector) ([]*corev1.Pod, error) {
	owned, err := index.Pods(c.podIndexer, index.Key(set.Namespace, controllerKind.Kind,
		set.Name, set.UID))
	if err != nil {
		return nil, err
	}
	orphans, err := index.Pods(c.podIndexer, index.ControllerKey(set.Namespace, nil))
	if err != nil {
		return nil, err
	}
	m, err := ownership.New[*corev1.Pod](ownership.Config{
		Owner:     set,
		OwnerKind: controllerKind,
		Selector:  sel,
		Patch: func(ctx context.Context, namespace, name string, patch []byte) error {
			_, err := c.client.CoreV1().Pods(namespace).Patch(ctx, name,
				types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		Recheck: c.recheck(set),
	})
	if err != nil {
		return nil, err
	}
	return m.Claim(ctx, append(owned, orphans...),
		func(p *corev1.Pod) bool { return isMemberOf(set, p) })
}
