package hpa

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	autoscalingclient "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/featuregate"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// controller reconciles HorizontalPodAutoscalers; keys are
// "namespace/name".
type controller struct {
	hpaClient autoscalingclient.HorizontalPodAutoscalersGetter
	scales    scale.ScalesGetter
	mapper    meta.RESTMapper
	hpas      autoscalinglisters.HorizontalPodAutoscalerLister
	pods      corelisters.PodLister
	recorder  record.EventRecorder
	calc      *calculator
	history   *history
	selectors *selectorStore
	clock     clock.PassiveClock
	loop      *workloop.Loop
	monitor   *monitor

	syncPeriod      time.Duration
	downscaleWindow time.Duration
	tolerance       float64
	workers         int

	configurableTolerance, generation, scaleToZero, staleGuard bool

	// invalidate runs the custom metrics API versions' periodic refresh
	// (nil without one).
	invalidate func(stop <-chan struct{})
}

// fixedInterval spaces every requeue by the sync period, failures
// included, as KCM's HPA queue does.
type fixedInterval time.Duration

func (f fixedInterval) When(string) time.Duration { return time.Duration(f) }
func (fixedInterval) NumRequeues(string) int      { return 1 }
func (fixedInterval) Forget(string)               {}

var _ workqueue.TypedRateLimiter[string] = fixedInterval(0)

// deps are what newController needs beyond the options.
type deps struct {
	name       string
	hpaClient  autoscalingclient.HorizontalPodAutoscalersGetter
	scales     scale.ScalesGetter
	mapper     meta.RESTMapper
	metrics    metricsSource
	hpas       cache.SharedIndexInformer
	pods       cache.SharedIndexInformer
	recorder   record.EventRecorder
	gates      func(f featuregate.Feature, def bool) bool
	invalidate func(stop <-chan struct{})
	loopOpts   workloop.Options
	registry   prometheus.Registerer // for the monitor's metrics; nil: unregistered
}

func newFromContext(_ context.Context, cc descriptor.Context, o Options,
	cfg *rest.Config) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	if cc.RESTMapper == nil {
		return nil, errors.New("descriptor.Context.RESTMapper is nil; the HPA controller " +
			"maps scale targets through it")
	}
	// Discovery is not cached here: the resolver caches what it needs.
	scales, err := scale.NewForConfig(cfg, cc.RESTMapper, dynamic.LegacyAPIPathResolverFunc,
		scale.NewDiscoveryScaleKindResolver(client.Discovery()))
	if err != nil {
		return nil, fmt.Errorf("scale client: %w", err)
	}
	versions := customclient.NewAvailableAPIsGetter(client.Discovery())
	resources, err := resourceclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("resource metrics client: %w", err)
	}
	externals, err := externalclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("external metrics client: %w", err)
	}
	return newController(o, deps{
		name:      cc.Name,
		hpaClient: client.AutoscalingV2(),
		scales:    scales,
		mapper:    cc.RESTMapper,
		metrics: restMetrics{resources: resources,
			custom:    customclient.NewForConfig(cfg, cc.RESTMapper, versions),
			externals: externals},
		hpas:     cc.InformerFactory.Autoscaling().V2().HorizontalPodAutoscalers().Informer(),
		pods:     cc.InformerFactory.Core().V1().Pods().Informer(),
		recorder: cc.EventRecorder,
		gates: func(f featuregate.Feature, def bool) bool {
			return gate.Enabled(cc.FeatureGate, f, def)
		},
		invalidate: func(stop <-chan struct{}) {
			customclient.PeriodicallyInvalidate(versions, o.SyncPeriod, stop)
		},
		loopOpts: workloop.Options{Metrics: cc.Metrics},
		registry: cc.Metrics,
	})
}

func newController(o Options, d deps) (*controller, error) {
	if d.gates == nil {
		d.gates = func(_ featuregate.Feature, def bool) bool { return def }
	}
	if d.recorder == nil {
		d.recorder = &record.FakeRecorder{}
	}
	mon, err := newMonitor(d.registry)
	if err != nil {
		return nil, err
	}
	c := &controller{
		hpaClient:             d.hpaClient,
		scales:                d.scales,
		mapper:                d.mapper,
		pods:                  corelisters.NewPodLister(d.pods.GetIndexer()),
		recorder:              d.recorder,
		history:               newHistory(),
		selectors:             newSelectorStore(),
		clock:                 o.Clock,
		syncPeriod:            o.SyncPeriod,
		downscaleWindow:       o.DownscaleStabilization,
		tolerance:             o.Tolerance,
		workers:               int(o.ConcurrentSyncs),
		configurableTolerance: d.gates(FeatureHPAConfigurableTolerance, true),
		generation:            d.gates(FeatureHPAGeneration, true),
		scaleToZero:           d.gates(FeatureHPAScaleToZero, true),
		staleGuard:            d.gates(FeatureStaleControllerConsistencyHPA, true),
		invalidate:            d.invalidate,
		monitor:               mon,
	}
	c.hpas = autoscalinglisters.NewHorizontalPodAutoscalerLister(d.hpas.GetIndexer())
	c.calc = &calculator{metrics: d.metrics, pods: c.pods, clock: o.Clock,
		cpuInitPeriod: o.CPUInitializationPeriod, readinessDelay: o.InitialReadinessDelay,
		podLevelRequests: d.gates(FeaturePodLevelResources, true)}
	lo := d.loopOpts
	lo.RateLimiter = fixedInterval(o.SyncPeriod)
	c.loop = workloop.New(d.name, c.sync, lo)
	// Not Loop.Watch: the handlers keep the selector cache and the HPA gauges
	// and need KCM's resync period; they feed the staleness guard themselves
	// (ObserveAdd, Observe, ObserveDelete).
	reg, err := d.hpas.AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    c.added,
		UpdateFunc: c.updated,
		DeleteFunc: c.deleted,
	}, o.SyncPeriod)
	if err != nil {
		c.loop.ShutDown()
		return nil, fmt.Errorf("HPA event handler: %w", err)
	}
	c.loop.WaitFor(reg.HasSynced, d.pods.HasSynced)
	return c, nil
}

// Run waits for the caches, then reconciles every HPA each sync period
// until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting HPA controller")
	defer log.Info("Shutting down HPA controller")
	// The refresh stops with the workers, whichever way they return.
	refreshCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if c.invalidate != nil {
		wg.Go(func() { c.invalidate(refreshCtx.Done()) })
	}
	defer wg.Wait()
	defer stop()
	return c.loop.RunWorkers(ctx, c.workers)
}

func key(obj any) (string, bool) {
	k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return k, err == nil
}

// added registers the HPA with a selector that matches nothing (its
// target's is learnt on its first sync) and syncs it at once.
func (c *controller) added(obj any, isInInitialList bool) {
	c.loop.ObserveAdd(obj, isInInitialList)
	k, ok := key(obj)
	if !ok {
		return
	}
	if c.selectors.putIfAbsent(k, labels.Nothing()) {
		c.monitor.hpas.Inc()
	}
	c.loop.Add(k)
}

// updated syncs a new generation at once (HPAGeneration); any other
// update, the controller's own status writes and resyncs included, waits
// for the HPA's next period.
func (c *controller) updated(old, obj any) {
	c.loop.Observe(obj)
	o, ok1 := old.(*autoscalingv2.HorizontalPodAutoscaler)
	n, ok2 := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if ok1 && ok2 && c.generation && o.Generation != n.Generation {
		c.added(obj, false)
		return
	}
	if k, ok := key(obj); ok {
		c.loop.AddRateLimited(k)
	}
}

// deleted forgets the HPA's selector; its history goes on its next sync.
func (c *controller) deleted(obj any) {
	c.loop.ObserveDelete(obj)
	k, ok := key(obj)
	if !ok {
		return
	}
	c.selectors.delete(k)
	c.monitor.hpas.Dec()
}

// sync reconciles one HPA and schedules its next sync a period later
// (a failure is retried a period later too).
func (c *controller) sync(ctx context.Context, k string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return workloop.Permanent(err)
	}
	hpa, err := c.hpas.HorizontalPodAutoscalers(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logr.FromContextOrDiscard(ctx).Info("Horizontal Pod Autoscaler has been deleted",
			"HPA", k)
		c.history.forget(k)
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.reconcile(ctx, hpa, k); err != nil {
		return err
	}
	return workloop.RequeueAfter(c.syncPeriod)
}

// selectorStore keeps each HPA's target selector, by namespace, to find
// pods that two HPAs would scale.
type selectorStore struct {
	mu  sync.RWMutex
	sel map[string]map[string]labels.Selector // namespace → key → selector
}

func newSelectorStore() *selectorStore {
	return &selectorStore{sel: map[string]map[string]labels.Selector{}}
}

func splitNS(k string) string {
	ns, _, _ := cache.SplitMetaNamespaceKey(k)
	return ns
}

// putIfAbsent registers an HPA; false when it was already.
func (s *selectorStore) putIfAbsent(k string, sel labels.Selector) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := splitNS(k)
	if s.sel[ns] == nil {
		s.sel[ns] = map[string]labels.Selector{}
	}
	if _, ok := s.sel[ns][k]; ok {
		return false
	}
	s.sel[ns][k] = sel
	return true
}

// putIfPresent sets the selector of a registered HPA; false when it is
// gone.
func (s *selectorStore) putIfPresent(k string, sel labels.Selector) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.sel[splitNS(k)]
	if _, ok := m[k]; !ok {
		return false
	}
	m[k] = sel
	return true
}

func (s *selectorStore) delete(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := splitNS(k)
	delete(s.sel[ns], k)
	if len(s.sel[ns]) == 0 {
		delete(s.sel, ns)
	}
}

// matching returns up to limit HPAs whose selectors match one of pods.
func (s *selectorStore) matching(namespace string, pods []*corev1.Pod, limit int) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	found := map[string]bool{}
	seen := map[string]bool{}
	for _, p := range pods {
		set := labels.Set(p.Labels)
		if seen[set.String()] {
			continue
		}
		seen[set.String()] = true
		for k, sel := range s.sel[namespace] {
			if sel.Matches(set) {
				found[k] = true
				if len(found) >= limit {
					return slices.Sorted(maps.Keys(found))
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(found))
}
