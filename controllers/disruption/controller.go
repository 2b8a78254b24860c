package disruption

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// controller keeps PodDisruptionBudgets' status; its main loop's keys are
// budgets' "namespace/name", its stale loop's are pods'.
type controller struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	clock     clock.Clock
	mapper    meta.RESTMapper
	scales    scale.ScalesGetter
	discovery discovery.DiscoveryInterface
	log       logr.Logger

	pdbs         policylisters.PodDisruptionBudgetLister
	pods         corelisters.PodLister
	rcs          corelisters.ReplicationControllerLister
	rss          appslisters.ReplicaSetLister
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister

	workers int
	// loop syncs budgets; stale resets pods' stale DisruptionTarget.
	loop, stale *workloop.Loop
	synced      []cache.InformerSynced
	// staleTimeout is stalePodDisruptionTimeout; tests shorten it.
	staleTimeout time.Duration
	// recheck and staleLater are loop.AddAfter and stale.AddAfter; tests
	// replace them to see the delays.
	recheck, staleLater func(key string, d time.Duration)
}

// config is what newController needs; tests fill it by hand.
type config struct {
	name      string
	workers   int
	client    kubernetes.Interface
	recorder  record.EventRecorder
	clock     clock.WithTicker
	mapper    meta.RESTMapper
	scales    scale.ScalesGetter
	discovery discovery.DiscoveryInterface
	loopOpts  workloop.Options // Metrics; the clock is set from clock
	log       logr.Logger

	pods         cache.SharedIndexInformer
	pdbs         cache.SharedIndexInformer
	rcs          cache.SharedIndexInformer
	rss          cache.SharedIndexInformer
	deployments  cache.SharedIndexInformer
	statefulSets cache.SharedIndexInformer
}

// newFromContext builds the controller from what the host passes, its
// scale client as KCM builds it: the controller's REST config, the host's
// REST mapper and a discovery-backed scale-kind resolver.
func newFromContext(ctx context.Context, cc descriptor.Context,
	workers int) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	var scales scale.ScalesGetter
	if cfg, err := cc.ClientBuilder.Config(clientName); err == nil {
		resolver := scale.NewDiscoveryScaleKindResolver(client.Discovery())
		scales, err = scale.NewForConfig(cfg, cc.RESTMapper,
			dynamic.LegacyAPIPathResolverFunc, resolver)
		if err != nil {
			return nil, fmt.Errorf("building the scale client: %w", err)
		}
	} else {
		// A host over ready-made clients has no REST config: budgets whose
		// pods have a controller other than the four built-in ones fail
		// their sync (and get the fail-safe status).
		scales = noScales{}
	}
	f := cc.InformerFactory
	return newController(config{
		name: cc.Name, workers: workers, client: client, recorder: cc.EventRecorder,
		clock: clock.RealClock{}, mapper: cc.RESTMapper, scales: scales,
		discovery: client.Discovery(), loopOpts: workloop.Options{Metrics: cc.Metrics},
		log:          logr.FromContextOrDiscard(ctx),
		pods:         f.Core().V1().Pods().Informer(),
		pdbs:         f.Policy().V1().PodDisruptionBudgets().Informer(),
		rcs:          f.Core().V1().ReplicationControllers().Informer(),
		rss:          f.Apps().V1().ReplicaSets().Informer(),
		deployments:  f.Apps().V1().Deployments().Informer(),
		statefulSets: f.Apps().V1().StatefulSets().Informer(),
	})
}

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
		client: cfg.client, recorder: cfg.recorder, clock: cfg.clock, mapper: cfg.mapper,
		scales: cfg.scales, discovery: cfg.discovery, log: cfg.log, workers: cfg.workers,
		pdbs:         policylisters.NewPodDisruptionBudgetLister(cfg.pdbs.GetIndexer()),
		pods:         corelisters.NewPodLister(cfg.pods.GetIndexer()),
		rcs:          corelisters.NewReplicationControllerLister(cfg.rcs.GetIndexer()),
		rss:          appslisters.NewReplicaSetLister(cfg.rss.GetIndexer()),
		deployments:  appslisters.NewDeploymentLister(cfg.deployments.GetIndexer()),
		statefulSets: appslisters.NewStatefulSetLister(cfg.statefulSets.GetIndexer()),
		staleTimeout: stalePodDisruptionTimeout,
	}
	// KCM waits for all six caches before any worker starts.
	for _, inf := range []cache.SharedIndexInformer{cfg.pods, cfg.pdbs, cfg.rcs, cfg.rss,
		cfg.deployments, cfg.statefulSets} {
		c.synced = append(c.synced, inf.HasSynced)
	}
	// The loops exist before any handler is registered: a running informer
	// (warm standby) calls the handlers at once. Released here on failure,
	// otherwise by Run.
	opts := cfg.loopOpts
	opts.Clock = cfg.clock
	c.loop = workloop.New(cfg.name, c.sync, opts)
	c.stale = workloop.New(cfg.name+"-stale-pod-disruption", c.syncStalePod, opts)
	c.recheck, c.staleLater = c.loop.AddAfter, c.stale.AddAfter
	shutDown := func() { c.loop.ShutDown(); c.stale.ShutDown() }
	if err := c.loop.Watch(cfg.pdbs, workloop.EnqueueKey()); err != nil {
		shutDown()
		return nil, fmt.Errorf("PodDisruptionBudget event handler: %w", err)
	}
	// Not Loop.Watch: a pod queues its budget, looked up through the cache,
	// and a stale DisruptionTarget condition on the second queue. The guard
	// needs no Observe here: only budgets are written through it, and they
	// are watched with Loop.Watch above.
	reg, err := cfg.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: func(_, cur any) { c.addPod(cur) },
		DeleteFunc: c.deletePod,
	})
	if err != nil {
		shutDown()
		return nil, fmt.Errorf("pod event handler: %w", err)
	}
	c.synced = append(c.synced, reg.HasSynced)
	return c, nil
}

// Run waits for the caches, then syncs budgets with the configured number
// of workers and resets stale DisruptionTarget conditions with one, until
// ctx is done. It releases both queues in every case.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting disruption controller", "workers", c.workers)
	defer log.Info("Shutting down disruption controller")
	c.loop.WaitFor(c.synced...)
	c.stale.WaitFor(c.synced...)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- c.loop.RunWorkers(ctx, c.workers) })
	wg.Go(func() { errs <- c.stale.RunWorkers(ctx, 1) })
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// addPod serves adds and updates: the budget covering the pod is synced,
// and a stale DisruptionTarget condition is scheduled for its reset.
func (c *controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pdb := c.budgetFor(pod); pdb != nil {
		c.loop.Add(key(pdb))
	}
	if stale, after := c.staleDisruption(pod); stale {
		c.staleLater(key(pod), after)
	}
}

func (c *controller) deletePod(obj any) {
	pod, ok := workloop.Object[*corev1.Pod](obj)
	if !ok {
		return
	}
	if pdb := c.budgetFor(pod); pdb != nil {
		c.loop.Add(key(pdb))
	}
}

// budgetFor is the budget a pod event syncs: as in KCM, the first of the
// budgets selecting the pod, with a warning event on the pod when there
// are more.
func (c *controller) budgetFor(pod *corev1.Pod) *policyv1.PodDisruptionBudget {
	pdbs, err := c.pdbs.GetPodPodDisruptionBudgets(pod)
	if err != nil || len(pdbs) == 0 {
		return nil
	}
	if len(pdbs) > 1 {
		msg := fmt.Sprintf("Pod %q/%q matches multiple PodDisruptionBudgets.  "+
			"Chose %q arbitrarily.", pod.Namespace, pod.Name, pdbs[0].Name)
		c.log.Info(msg)
		c.recorder.Event(pod, corev1.EventTypeWarning, "MultiplePodDisruptionBudgets", msg)
	}
	return pdbs[0]
}

// noScales answers every scale read with an error: the host gave no REST
// config to build a scale client from.
type noScales struct{}

func (noScales) Scales(string) scale.ScaleInterface { return noScales{} }

var errNoScales = errors.New("no scale client: the host has no REST config " +
	"(it was built over ready-made clients)")

func (noScales) Get(context.Context, schema.GroupResource, string,
	metav1.GetOptions) (*autoscalingv1.Scale, error) {
	return nil, errNoScales
}

func (noScales) Update(context.Context, schema.GroupResource, *autoscalingv1.Scale,
	metav1.UpdateOptions) (*autoscalingv1.Scale, error) {
	return nil, errNoScales
}

func (noScales) Patch(context.Context, schema.GroupVersionResource, string, types.PatchType,
	[]byte, metav1.PatchOptions) (*autoscalingv1.Scale, error) {
	return nil, errNoScales
}
