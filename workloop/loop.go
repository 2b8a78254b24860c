package workloop

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// SyncFunc handles one key; see the package doc for what its result means.
type SyncFunc[K comparable] func(ctx context.Context, key K) error

// Options configures a Loop. The zero value is usable.
type Options struct {
	// Workers is how many keys Run syncs at once. Default: 1.
	Workers int
	// MaxRetries drops a key after that many consecutive failures. Default:
	// 0, retry forever (with back-off).
	MaxRetries int
	// Guard, if set, skips syncs of keys whose writes the informers have not
	// caught up with (see Guard).
	Guard *Guard
	// Clock drives RequeueAfter and AddAfter delays. Default: the real clock.
	Clock clock.WithTicker
}

// Loop is a named work queue of keys and the workers that sync them. Create
// it with New; it is a descriptor.Controller (Run).
type Loop[K comparable] struct {
	name   string
	sync   SyncFunc[K]
	opts   Options
	queue  workqueue.TypedRateLimitingInterface[K]
	mu     sync.Mutex
	synced []cache.InformerSynced
}

// New returns a Loop whose queue is named name (the name labels the
// workqueue metrics and this package's; use the controller's name). The
// queue exists from here on, so handlers may add keys before Run; Run or
// ShutDown releases it.
func New[K comparable](name string, sync SyncFunc[K], opts Options) *Loop[K] {
	if opts.Workers < 1 {
		opts.Workers = 1
	}
	cfg := workqueue.TypedRateLimitingQueueConfig[K]{Name: name}
	if opts.Clock != nil {
		cfg.Clock = opts.Clock
	}
	l := &Loop[K]{
		name:  name,
		sync:  sync,
		opts:  opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[K](), cfg),
	}
	l.zeroMetrics()
	return l
}

// Name is the queue's name.
func (l *Loop[K]) Name() string { return l.name }

// Add queues key for a sync.
func (l *Loop[K]) Add(key K) { l.queue.Add(key) }

// AddAfter queues key for a sync once d has passed.
func (l *Loop[K]) AddAfter(key K, d time.Duration) { l.queue.AddAfter(key, d) }

// AddRateLimited queues key after its back-off.
func (l *Loop[K]) AddRateLimited(key K) { l.queue.AddRateLimited(key) }

// Len is the number of keys waiting.
func (l *Loop[K]) Len() int { return l.queue.Len() }

// ShutDown releases the queue without running workers, for a controller
// that gives up before Run.
func (l *Loop[K]) ShutDown() { l.queue.ShutDown() }

// WaitFor adds informers whose sync Run waits for, beyond the watched ones.
func (l *Loop[K]) WaitFor(synced ...cache.InformerSynced) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.synced = append(l.synced, synced...)
}

// Run waits for the watched informers, then syncs keys with
// Options.Workers workers until ctx is done.
func (l *Loop[K]) Run(ctx context.Context) error {
	return l.RunWorkers(ctx, l.opts.Workers)
}

// RunWorkers is Run with the given number of workers and further informers
// to wait for. If ctx ends before the caches synced, it returns nil without
// starting a worker. It always shuts the queue down before it returns.
func (l *Loop[K]) RunWorkers(ctx context.Context, workers int, synced ...cache.InformerSynced) error {
	defer l.queue.ShutDown()
	if workers < 1 {
		return fmt.Errorf("workloop %s: workers must be at least 1, got %d", l.name, workers)
	}
	l.mu.Lock()
	all := append(append([]cache.InformerSynced(nil), l.synced...), synced...)
	l.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), all...) {
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

// next syncs one key; false once the queue is shut down.
func (l *Loop[K]) next(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	log := logr.FromContextOrDiscard(ctx)
	if g := l.opts.Guard; g != nil {
		if stale := g.check(key); stale != "" {
			staleSkips.WithLabelValues(l.name, stale).Inc()
			log.V(4).Info("Skipping a sync: the cache has not caught up with this controller's write", "key", key, "resource", stale)
			l.queue.AddRateLimited(key)
			return true
		}
	}
	err := l.safeSync(ctx, key)
	var after requeueAfter
	switch {
	case err == nil:
		l.queue.Forget(key)
	case errors.As(err, &after):
		l.queue.Forget(key)
		l.queue.AddAfter(key, after.d)
	case IsPermanent(err):
		log.Error(err, "Dropping key after a permanent error", "key", key)
		l.queue.Forget(key)
	case l.opts.MaxRetries > 0 && l.queue.NumRequeues(key) >= l.opts.MaxRetries:
		log.Error(err, "Dropping key after too many retries", "key", key, "retries", l.queue.NumRequeues(key))
		l.queue.Forget(key)
	default:
		log.V(2).Info("Requeueing key after an error", "key", key, "err", err.Error())
		l.queue.AddRateLimited(key)
	}
	return true
}

func (l *Loop[K]) safeSync(ctx context.Context, key K) (err error) {
	defer func() {
		if v := recover(); v != nil {
			syncPanics.WithLabelValues(l.name).Inc()
			err = fmt.Errorf("workloop %s: sync of %v panicked: %v", l.name, key, v)
			logr.FromContextOrDiscard(ctx).Error(err, "Recovered from a panic in a sync; requeueing the key", "controller", l.name, "key", key, "stack", string(debug.Stack()))
		}
	}()
	return l.sync(ctx, key)
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that the Loop drops the key instead of retrying.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// requeueAfter asks for another sync after d.
type requeueAfter struct{ d time.Duration }

func (r requeueAfter) Error() string { return fmt.Sprintf("requeue after %v", r.d) }

// RequeueAfter is what a sync function returns to be called again for the
// same key once d has passed, without counting a failure: for work that is
// due later (a TTL, a deadline).
func RequeueAfter(d time.Duration) error { return requeueAfter{d} }
