package workloop

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// SyncFunc brings the object named by key to its desired state. Its
// error decides what happens to the key: nil forgets it, Permanent drops
// it, RequeueAfter schedules it again, anything else retries with back-off.
type SyncFunc func(ctx context.Context, key string) error

// Options configures a Loop. The zero value is ready to use.
type Options struct {
	// Workers is how many keys Run syncs in parallel. Default: 1.
	Workers int
	// MaxRetries drops a key after that many consecutive failures.
	// Default: 0, retry forever (with back-off).
	MaxRetries int
	// Clock times delayed enqueues and the staleness guard. Default: the
	// real clock.
	Clock clock.WithTicker
	// RateLimiter spaces out retries. Default:
	// workqueue.DefaultTypedControllerRateLimiter.
	RateLimiter workqueue.TypedRateLimiter[string]
	// StaleRetry is how long a key held back by the staleness guard waits
	// before it is tried again (an informer event for it retries sooner).
	// Default: 1s.
	StaleRetry time.Duration
	// StaleTimeout is the longest the staleness guard holds back a key
	// after a write. Default: 1m.
	StaleTimeout time.Duration
	// Metrics is the registry the loop's counters
	// (workloop_sync_panics_total, workloop_stale_syncs_skipped_total,
	// workloop_stale_writes_expired_total) are
	// on: in an InitFunc, descriptor.Context's Metrics, the registry the
	// Manager serves. Loops sharing a registry share its counters, each
	// its own series. Default: the process-wide counters RegisterMetrics
	// registers.
	Metrics prometheus.Registerer
}

func (o Options) withDefaults() Options {
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.RateLimiter == nil {
		o.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	if o.StaleRetry == 0 {
		o.StaleRetry = time.Second
	}
	if o.StaleTimeout == 0 {
		o.StaleTimeout = time.Minute
	}
	return o
}

// Loop is a named work queue, its workers and the informers that feed it.
// A *Loop is a descriptor.Controller: Run(ctx) runs Options.Workers
// workers.
type Loop struct {
	name     string
	sync     SyncFunc
	opts     Options
	queue    workqueue.TypedRateLimitingInterface[string]
	guard    *guard
	counters *counters
	// metricsErr is why the counters could not be registered on
	// Options.Metrics (a collector of another kind under their names):
	// Run returns it.
	metricsErr error
	mu         sync.Mutex
	synced     []cache.InformerSynced // from WaitFor: polled
	checkers   []cache.DoneChecker    // from Watch: waited for without polling
}

// New returns a Loop whose queue is named after the controller (the name
// labels workqueue and kit metrics). The queue exists from here on, so
// event handlers may enqueue before Run; Run or ShutDown releases it.
// New starts no goroutine.
func New(name string, sync SyncFunc, opts Options) *Loop {
	opts = opts.withDefaults()
	l := &Loop{
		name: name,
		sync: sync,
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, Clock: opts.Clock}),
		guard:    newGuard(opts.Clock, opts.StaleTimeout),
		counters: processCounters,
	}
	if opts.Metrics != nil {
		l.counters, l.metricsErr = countersOn(opts.Metrics)
		if l.metricsErr != nil {
			l.metricsErr = fmt.Errorf("%s: Options.Metrics: %w", name, l.metricsErr)
		}
	}
	return l
}

// Name is the controller name the Loop was created with.
func (l *Loop) Name() string { return l.name }

// Add enqueues key.
func (l *Loop) Add(key string) { l.queue.Add(key) }

// AddAfter enqueues key after d.
func (l *Loop) AddAfter(key string, d time.Duration) { l.queue.AddAfter(key, d) }

// AddRateLimited enqueues key after its back-off.
func (l *Loop) AddRateLimited(key string) { l.queue.AddRateLimited(key) }

// Len is the number of keys waiting.
func (l *Loop) Len() int { return l.queue.Len() }

// ShutDown releases the queue without running workers.
func (l *Loop) ShutDown() { l.queue.ShutDown() }

// WaitFor adds caches Run waits for before it starts workers, for
// informers whose handlers were registered without Watch.
func (l *Loop) WaitFor(synced ...cache.InformerSynced) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.synced = append(l.synced, synced...)
}

// Run runs Options.Workers workers; see RunWorkers.
func (l *Loop) Run(ctx context.Context) error { return l.RunWorkers(ctx, l.opts.Workers) }

// RunWorkers waits until every watched informer has synced, then syncs
// keys with the given number of workers until ctx is done. If ctx ends
// before the caches sync it returns nil without starting a worker. It
// returns only after every worker has returned, and always shuts the
// queue down.
func (l *Loop) RunWorkers(ctx context.Context, workers int) error {
	defer l.queue.ShutDown()
	if workers < 1 {
		return fmt.Errorf("%s: workers must be at least 1, got %d; "+
			"set Options.Workers or pass a positive count", l.name, workers)
	}
	if l.metricsErr != nil {
		return l.metricsErr
	}
	l.mu.Lock()
	synced := append([]cache.InformerSynced(nil), l.synced...)
	checkers := append([]cache.DoneChecker(nil), l.checkers...)
	l.mu.Unlock()
	if !waitSynced(ctx, checkers, synced) {
		return nil
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for l.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
	return nil
}

// waitSynced waits until every checker is done and every synced reports
// true; false if ctx ends first. Checkers signal; InformerSynced funcs can
// only be polled: every millisecond at first, as a warm cache's handlers
// catch up within milliseconds, backing off to client-go's 100 ms.
func waitSynced(
	ctx context.Context,
	checkers []cache.DoneChecker,
	synced []cache.InformerSynced,
) bool {
	if !cache.WaitFor(ctx, "", checkers...) {
		return false
	}
	for d := time.Millisecond; ; d = min(2*d, 100*time.Millisecond) {
		if !slices.ContainsFunc(synced, func(s cache.InformerSynced) bool { return !s() }) {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// next processes one key; false once the queue is shut down.
func (l *Loop) next(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	log := logr.FromContextOrDiscard(ctx).WithValues("controller", l.name, "key", key)
	fresh, expired := l.guard.fresh(key)
	l.reportExpired(log, expired)
	if !fresh {
		l.counters.staleSkips.WithLabelValues(l.name).Inc()
		log.V(4).Info("Skipping sync until the informer delivers this controller's last write")
		l.queue.AddAfter(key, l.opts.StaleRetry)
		return true
	}
	err := l.safeSync(ctx, key)
	if d, ok := requeueDelay(err); ok {
		l.queue.Forget(key)
		l.queue.AddAfter(key, d)
		return true
	}
	switch {
	case err == nil:
		l.queue.Forget(key)
	case IsPermanent(err):
		log.Error(err, "Dropping key after a permanent error")
		l.queue.Forget(key)
	case l.opts.MaxRetries > 0 && l.queue.NumRequeues(key) >= l.opts.MaxRetries:
		log.Error(err, "Dropping key after too many retries", "retries", l.queue.NumRequeues(key))
		l.queue.Forget(key)
	default:
		log.V(2).Info("Requeueing key after an error", "err", err.Error())
		l.queue.AddRateLimited(key)
	}
	return true
}

// reportExpired counts the writes the staleness guard gave up on, and logs
// the first of each kind of object: no informer delivered them within
// StaleTimeout, so their key was held back that long. Either the informer
// lags by that much, or the handler of that kind does not tell the Loop
// what it delivers, and every write of the kind holds its key for the
// whole timeout; the log line says how to fix the latter.
func (l *Loop) reportExpired(log logr.Logger, expired []write) {
	for _, w := range expired {
		l.counters.staleExpired.WithLabelValues(l.name).Inc()
		v := 2
		if l.guard.firstExpiry(w.kind) {
			v = 0
		}
		log.V(v).Info("A write was not delivered by an informer within StaleTimeout; the key was "+
			"held back that long. If this repeats, the informer of this kind does not feed the "+
			"Loop: register its handler with Loop.Watch, or call Loop.Observe, ObserveAdd and "+
			"ObserveDelete in it", "object", w.kind+" "+w.name, "staleTimeout", l.opts.StaleTimeout)
	}
}

var errPanicked = errors.New("sync panicked")

func (l *Loop) safeSync(ctx context.Context, key string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			l.counters.panics.WithLabelValues(l.name).Inc()
			err = fmt.Errorf("%w: %s %s: %v", errPanicked, l.name, key, v)
			logr.FromContextOrDiscard(ctx).Error(err, "Recovered from a panic in sync",
				"controller", l.name, "key", key, "stack", string(debug.Stack()))
		}
	}()
	return l.sync(ctx, key)
}
