package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/passes"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// Queue names, as KCM's (they label the work-queue metrics).
const (
	primaryQueue  = "resourcequota_primary"
	priorityQueue = "resourcequota_priority"
)

// controller keeps every ResourceQuota's status.used; its keys are
// namespace/name.
type controller struct {
	client      kubernetes.Interface
	quotas      corelisters.ResourceQuotaLister
	quotaSynced cache.InformerSynced
	registry    *registry
	monitors    *monitors
	// discover lists the quotable resources (replaced in tests).
	discover func() (map[schema.GroupVersionResource]struct{}, error)

	workers          int
	syncPeriod       time.Duration
	discoveryPeriod  time.Duration
	informersStarted <-chan struct{}

	// primary recalculates; priority serves quotas whose status lacks a
	// usage (new quotas, changed limits), so they are not stuck behind a
	// full resync.
	primary, priority *workloop.Loop

	// workerLock: syncs hold it shared, a change of the monitored
	// resources exclusively (so no quota is calculated half-monitored).
	workerLock sync.RWMutex
}

// typedOnly serves hosts that offer no object-or-metadata factory: only
// the resources client-go has types for are monitored.
type typedOnly struct {
	kinformers.SharedInformerFactory
}

var _ informers.ObjectOrMetadataFactory = typedOnly{}

func newController(ctx context.Context, cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(cc.Name)
	if err != nil {
		return nil, err
	}
	factory := cc.ObjectOrMetadataInformerFactory
	if factory == nil {
		factory = typedOnly{cc.InformerFactory}
	}
	var resync time.Duration
	if cc.ResyncPeriod != nil {
		resync = cc.ResyncPeriod()
	}
	podLevel := gate.Enabled(cc.FeatureGate, FeaturePodLevelResources, true)
	c := &controller{
		client:           client,
		workers:          int(o.ConcurrentResourceQuotaSyncs),
		syncPeriod:       o.ResourceQuotaSyncPeriod,
		discoveryPeriod:  DiscoveryPeriod,
		informersStarted: cc.InformersStarted,
		discover: func() (map[schema.GroupVersionResource]struct{}, error) {
			return quotable(discoveryOf(client))
		},
	}
	c.monitors = &monitors{factory: factory, resync: resync, replenish: c.replenish}
	c.registry = newRegistry(builtinEvaluators(c.monitors.lister, o.Clock, podLevel)...)
	c.monitors.registry = c.registry
	c.primary = workloop.New(primaryQueue, c.sync, workloop.Options{Metrics: cc.Metrics})
	c.priority = workloop.New(priorityQueue, c.sync, workloop.Options{Metrics: cc.Metrics})
	fail := func(err error) (*controller, error) {
		c.primary.ShutDown()
		c.priority.ShutDown()
		return nil, err
	}

	informer := cc.InformerFactory.Core().V1().ResourceQuotas()
	c.quotas = informer.Lister()
	// Not Loop.Watch: a quota whose hard limits changed goes to the priority
	// queue (KCM's missingUsageQueue), ahead of the others.
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.addQuota,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.ResourceQuota)
			n, ok2 := newObj.(*corev1.ResourceQuota)
			if ok1 && ok2 && !sameLists(o.Spec.Hard, n.Spec.Hard) {
				c.addQuota(n)
			}
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.primary.Add(key)
			}
		},
	})
	if err != nil {
		return fail(fmt.Errorf("resourcequota event handler: %w", err))
	}
	c.quotaSynced = reg.HasSynced

	resources, err := c.discover()
	log := logr.FromContextOrDiscard(ctx)
	switch {
	case discovery.IsGroupDiscoveryFailedError(err):
		log.Error(
			err,
			"Initial discovery check failure, continuing and counting on future sync update",
		)
	case err != nil:
		return fail(err)
	}
	if err := c.monitors.sync(ctx, resources); err != nil {
		log.Error(err, "Initial monitor sync has error")
	}
	synced := func() bool { return c.quotaSynced() && c.monitors.synced() }
	c.primary.WaitFor(synced)
	c.priority.WaitFor(synced)
	return c, nil
}

func discoveryOf(client kubernetes.Interface) discovery.ServerResourcesInterface {
	if client == nil {
		return nil
	}
	return client.Discovery()
}

// builtinEvaluators are the evaluators of the core resources; discovery
// adds object counts for the rest.
func builtinEvaluators(
	lister func(schema.GroupVersionResource) listFunc,
	clk clock.PassiveClock,
	podLevel bool,
) []*evaluator {
	core := func(r string) schema.GroupVersionResource {
		return corev1.SchemeGroupVersion.WithResource(r)
	}
	count := func(r string, alias corev1.ResourceName) *evaluator {
		return newCountEvaluator(schema.GroupResource{Resource: r}, lister(core(r)), alias)
	}
	return []*evaluator{
		podEvaluator(lister(core("pods")), clk, podLevel),
		serviceEvaluator(lister(core("services"))),
		pvcEvaluator(lister(core("persistentvolumeclaims"))),
		claimEvaluator(lister(resourcev1.SchemeGroupVersion.WithResource("resourceclaims"))),
		count("configmaps", corev1.ResourceConfigMaps),
		count("resourcequotas", corev1.ResourceQuotas),
		count("replicationcontrollers", corev1.ResourceReplicationControllers),
		count("secrets", corev1.ResourceSecrets),
	}
}

// Run starts the monitors once the term's informers have started, waits
// for the caches, then recalculates quotas until ctx is done: both queues'
// workers, a full recalculation every sync period and a discovery of new
// resources every DiscoveryPeriod.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting resource quota controller", "workers", c.workers)
	defer log.Info("Shutting down resource quota controller")
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-c.informersStarted:
		}
		c.monitors.start(ctx.Done())
	})
	errs := make(chan error, 2)
	for _, l := range []*workloop.Loop{c.primary, c.priority} {
		wg.Go(func() { errs <- l.RunWorkers(ctx, c.workers) })
	}
	wg.Go(func() {
		synced := func() bool { return c.quotaSynced() && c.monitors.synced() }
		passes.Run(ctx, clock.RealClock{}, synced, c.syncPeriod, c.enqueueAll)
	})
	wg.Go(func() { passes.Every(ctx, clock.RealClock{}, c.discoveryPeriod, c.rediscover()) })
	<-ctx.Done()
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// enqueueAll queues every quota for a full recalculation.
func (c *controller) enqueueAll(ctx context.Context) {
	qs, err := c.quotas.List(labels.Everything())
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Unable to enqueue all resource quotas")
		return
	}
	for _, q := range qs {
		c.primary.Add(q.Namespace + "/" + q.Name)
	}
	logr.FromContextOrDiscard(ctx).
		V(4).
		Info("Queued all resource quotas for full calculation of usage", "count", len(qs))
}

// addQuota queues a quota: on the priority queue when its status lacks the
// usage of a limit some evaluator measures, else on the primary one.
func (c *controller) addQuota(obj any) {
	q, ok := obj.(*corev1.ResourceQuota)
	if !ok {
		return
	}
	key := q.Namespace + "/" + q.Name
	if !sameLists(q.Spec.Hard, q.Status.Hard) {
		c.priority.Add(key)
		return
	}
	for name := range q.Status.Hard {
		if _, ok := q.Status.Used[name]; !ok && c.registry.matchesAny([]corev1.ResourceName{name}) {
			c.priority.Add(key)
			return
		}
	}
	c.primary.Add(key)
}

// replenish queues the quotas of namespace that limit something gr's
// evaluator measures.
//
// A quota is matched on its spec.hard as well as its status.hard: the
// cached quota lags this controller's own status writes, so a quota whose
// first usage (or a newly limited resource) was just measured and written
// still shows no such limit in its cached status. A change seen in that
// window happened after the measurement and must recount the quota; were
// it matched on status.hard alone, nothing would recount it until the
// next full resync.
func (c *controller) replenish(gr schema.GroupResource, namespace string) {
	e := c.registry.get(gr)
	if e == nil {
		return
	}
	qs, err := c.quotas.ResourceQuotas(namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range qs {
		limited := append(resourceNames(q.Spec.Hard), resourceNames(q.Status.Hard)...)
		if len(e.matching(limited)) > 0 {
			c.primary.Add(q.Namespace + "/" + q.Name)
		}
	}
}

// sync recalculates one quota's usage and writes its status if it changed.
func (c *controller) sync(ctx context.Context, key string) error {
	c.workerLock.RLock()
	defer c.workerLock.RUnlock()
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	q, err := c.quotas.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		logr.FromContextOrDiscard(ctx).V(2).Info("Resource quota has been deleted", "key", key)
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncQuota(ctx, q)
}

// syncQuota: status.hard becomes spec.hard; status.used keeps what it had
// for resources no evaluator measures, takes the measured usage for the
// others, and is masked to the resources of spec.hard.
func (c *controller) syncQuota(ctx context.Context, q *corev1.ResourceQuota) error {
	dirty := !sameLists(q.Spec.Hard, q.Status.Hard) || q.Status.Hard == nil || q.Status.Used == nil
	used := corev1.ResourceList{}
	if q.Status.Used != nil {
		used = addLists(corev1.ResourceList{}, q.Status.Used)
	}
	hard := addLists(corev1.ResourceList{}, q.Spec.Hard)
	measured, calcErr := calculateUsage(
		q.Namespace,
		q.Spec.Scopes,
		q.Spec.ScopeSelector,
		hard,
		c.registry,
	)
	maps.Copy(used, measured)
	used = maskList(used, resourceNames(hard))
	dirty = dirty || !sameLists(used, q.Status.Used)
	if !dirty {
		return calcErr
	}
	upd := q.DeepCopy()
	upd.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	_, err := c.client.CoreV1().
		ResourceQuotas(q.Namespace).
		UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	return errors.Join(calcErr, err)
}

// rediscover returns the periodic discovery: when the quotable resources
// changed, the monitors follow (with the workers held) and the new ones
// are waited for, at most one period. Groups that failed discovery keep
// their last known resources.
func (c *controller) rediscover() func(context.Context) {
	var last map[schema.GroupVersionResource]struct{}
	return func(ctx context.Context) {
		log := logr.FromContextOrDiscard(ctx)
		found, err := c.discover()
		if err != nil {
			log.Error(err, "Error during resource discovery")
			failed, partial := discovery.GroupDiscoveryFailedErrorGroups(err)
			if !partial || len(found) == 0 {
				return
			}
			for gvr := range last {
				if _, ok := failed[gvr.GroupVersion()]; ok {
					found[gvr] = struct{}{}
				}
			}
		}
		if last != nil && maps.Equal(last, found) {
			return
		}
		c.workerLock.Lock()
		defer c.workerLock.Unlock()
		if err := c.monitors.sync(ctx, found); err != nil {
			log.Error(err, "Failed to sync resource monitors")
			return
		}
		last = found
		waitCtx, cancel := context.WithTimeout(ctx, c.discoveryPeriod)
		defer cancel()
		if !cache.WaitForCacheSync(waitCtx.Done(), c.monitors.synced) {
			if ctx.Err() != nil {
				// A stop, not a failure: nothing to report.
				log.V(2).
					Info("Stopped waiting for quota monitor sync", "reason", context.Cause(ctx))
				return
			}
			log.Error(
				errors.New("timed out waiting for quota monitor sync"),
				"Quota monitors not synced",
			)
			return
		}
		log.V(2).Info("Synced quota controller with discovered resources", "resources", len(found))
	}
}
