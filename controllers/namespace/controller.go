package namespace

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// deletionDelay is how long after an event a namespace being deleted is
// first worked: time for the other API servers of an HA control plane to
// learn of the deletion (and refuse new objects in the namespace), and for
// objects created at the last moment to become visible, as in KCM.
const deletionDelay = 5 * time.Second

// KCM raises the namespace controller's client limits by these factors:
// emptying a namespace takes many discovery, list and delete calls.
const (
	qpsFactor   = 20
	burstFactor = 100
)

// controller empties namespaces being deleted; its keys are namespace
// names.
type controller struct {
	namespaces corelisters.NamespaceLister
	synced     cache.InformerSynced
	deleter    *deleter
	workers    int
	loop       *workloop.Loop
	// every is --namespace-sync-period (0: no periodic pass); ticks times
	// it.
	every time.Duration
	ticks clock.WithTicker
}

func newController(ctx context.Context, cc descriptor.Context, o Options) (*controller, error) {
	client, meta, err := clients(cc.ClientBuilder, cc.Name)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Core().V1().Namespaces()
	c := &controller{
		namespaces: informer.Lister(),
		deleter: newDeleter(
			client,
			meta,
			serverNamespacedResources(client.Discovery()),
			o.Clock,
		),
		workers: int(o.ConcurrentNamespaceSyncs),
		every:   o.NamespaceSyncPeriod,
		ticks:   clock.RealClock{},
	}
	// The loop exists before the handler is registered (a running informer
	// calls it at once); on a later failure it is shut down here,
	// otherwise Run releases it.
	c.loop = workloop.New(cc.Name, c.sync, workloop.Options{
		RateLimiter: rateLimiter(o.Clock), Metrics: cc.Metrics})
	// No handler resync period: client-go raises one asked for after the
	// informer started (a warm standby's takeover) to the informer's check
	// period, hours; Run's own ticker gives KCM's periodic pass instead.
	// Not Loop.Watch: a namespace being deleted is queued after KCM's delay
	// (deletionDelay), not at once.
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.namespaceChanged,
		UpdateFunc: func(_, obj any) { c.namespaceChanged(obj) },
	})
	if err != nil {
		c.loop.ShutDown()
		return nil, fmt.Errorf("namespace event handler: %w", err)
	}
	c.synced = reg.HasSynced
	return c, nil
}

// clients returns the typed and metadata clients the controller works
// with: built from the controller's REST config with KCM's raised limits
// when the host has a config, else the builder's own clients (a host over
// fake clientsets).
func clients(
	b descriptor.ClientBuilder,
	name string,
) (kubernetes.Interface, metadata.Interface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		client, err := b.Client(name)
		if err != nil {
			return nil, nil, err
		}
		meta, err := b.MetadataClient(name)
		if err != nil {
			return nil, nil, err
		}
		return client, meta, nil
	}
	raiseLimits(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("controller %q: client: %w", name, err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("controller %q: metadata client: %w", name, err)
	}
	return client, meta, nil
}

// raiseLimits multiplies cfg's QPS and burst as KCM does, unless the host
// set a rate limiter of its own (which then decides).
func raiseLimits(cfg *rest.Config) {
	if cfg.RateLimiter != nil {
		return
	}
	if cfg.QPS == 0 {
		cfg.QPS = rest.DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = rest.DefaultBurst
	}
	cfg.QPS *= qpsFactor
	cfg.Burst *= burstFactor
}

// serverNamespacedResources asks the server, at every call, for its
// preferred namespaced resources, as KCM's namespace controller does.
func serverNamespacedResources(
	d discovery.DiscoveryInterface,
) func() ([]*metav1.APIResourceList, error) {
	return func() ([]*metav1.APIResourceList, error) {
		return discovery.ServerPreferredNamespacedResources(d)
	}
}

// rateLimiter retries a failing namespace with back-off from 5ms, at
// least once a minute, and all retries together at 10 a second with a
// burst of 100, as KCM does.
func rateLimiter(c clock.PassiveClock) workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](
			5*time.Millisecond,
			time.Minute,
		),
		newBucket(c, 10, 100),
	)
}

// bucket is a token bucket shared by all keys: qps tokens a second, at
// most burst saved. Each When takes a token, and when none is left says
// how long until the one it took is earned (workqueue's bucket limiter,
// without golang.org/x/time, which is not a direct dependency).
type bucket struct {
	mu     sync.Mutex
	clock  clock.PassiveClock
	qps    float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(c clock.PassiveClock, qps, burst float64) *bucket {
	return &bucket{clock: c, qps: qps, burst: burst, tokens: burst, last: c.Now()}
}

func (b *bucket) When(string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.qps)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.qps * float64(time.Second))
}

func (b *bucket) Forget(string) {}

func (b *bucket) NumRequeues(string) int { return 0 }

// Run waits for the namespace cache, then empties namespaces being deleted
// until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Starting namespace controller", "workers", c.workers)
	defer log.Info("Shutting down namespace controller")
	c.loop.WaitFor(c.synced)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { c.periodicPass(ctx) })
	return c.loop.RunWorkers(ctx, c.workers)
}

// periodicPass queues every namespace being deleted once per sync period
// until ctx is done, as KCM's informer resync does. A ticker, not
// passes.Every: like a resync, the first pass comes a period after the
// start (the informer's initial list has just queued every namespace).
func (c *controller) periodicPass(ctx context.Context) {
	if c.every <= 0 {
		return
	}
	t := c.ticks.NewTicker(c.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			all, err := c.namespaces.List(labels.Everything())
			if err != nil {
				continue
			}
			for _, ns := range all {
				c.namespaceChanged(ns)
			}
		}
	}
}

// namespaceChanged queues a namespace being deleted, after deletionDelay.
func (c *controller) namespaceChanged(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || ns.DeletionTimestamp == nil || ns.DeletionTimestamp.IsZero() {
		return
	}
	c.loop.AddAfter(ns.Name, deletionDelay)
}

// sync empties the namespace named key and finalizes it. Content that
// takes time to go (graceful pod deletion, finalizers) requeues the key
// after half the estimate and a second, as in KCM.
func (c *controller) sync(ctx context.Context, key string) error {
	log := logr.FromContextOrDiscard(ctx)
	if _, err := c.namespaces.Get(key); apierrors.IsNotFound(err) {
		log.Info("Namespace has been deleted", "namespace", key)
		return nil
	} else if err != nil {
		return err
	}
	err := c.deleter.delete(ctx, key)
	var remaining *contentRemainingError
	if errors.As(err, &remaining) {
		wait := time.Duration(remaining.estimate/2+1) * time.Second
		log.V(4).
			Info("Content remaining in namespace", "namespace", key, "waitSeconds", wait.Seconds())
		return workloop.RequeueAfter(wait)
	}
	if err != nil {
		return fmt.Errorf("deletion of namespace %s failed: %w", key, err)
	}
	return nil
}
