// Package queue is the work loop the built-in controllers share: a named,
// rate-limited workqueue, panic-safe workers, and the retry policy.
//
// Guarantees: Run starts the workers (RunAfterSync once the caches have
// synced), blocks until ctx is done, shuts the queue down and returns only
// after every worker has returned; a panic in the sync function is
// recovered, logged with the key, and retried like an error; a key is never
// processed by two workers at once (workqueue's rule).
//
// Non-guarantees: ordering between keys; a key dropped after MaxRetries is
// only logged (the next event for the object enqueues it again).
package queue

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
)

// SyncFunc handles one key. A nil error forgets the key's failures; an
// error requeues it with rate limiting, unless it is Permanent.
type SyncFunc[T comparable] func(ctx context.Context, key T) error

// Options configures a Loop.
type Options struct {
	// MaxRetries drops a key after that many consecutive failures; 0 means
	// retry forever (with back-off).
	MaxRetries int
}

// Loop is a named work queue and its workers.
type Loop[T comparable] struct {
	name  string
	sync  SyncFunc[T]
	opts  Options
	queue workqueue.TypedRateLimitingInterface[T]
}

// New returns a Loop whose queue is named after the controller (the name
// labels workqueue metrics). The queue exists from here on, so event
// handlers may Add before Run; Run (or ShutDown) releases it.
func New[T comparable](name string, sync SyncFunc[T], opts Options) *Loop[T] {
	return &Loop[T]{
		name: name,
		sync: sync,
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[T](),
			workqueue.TypedRateLimitingQueueConfig[T]{Name: name},
		),
	}
}

// Add enqueues key.
func (l *Loop[T]) Add(key T) { l.queue.Add(key) }

// AddAfter enqueues key after d.
func (l *Loop[T]) AddAfter(key T, d time.Duration) { l.queue.AddAfter(key, d) }

// AddRateLimited enqueues key after its back-off.
func (l *Loop[T]) AddRateLimited(key T) { l.queue.AddRateLimited(key) }

// Len is the number of keys waiting.
func (l *Loop[T]) Len() int { return l.queue.Len() }

// ShutDown releases the queue without running workers.
func (l *Loop[T]) ShutDown() { l.queue.ShutDown() }

// Run processes keys with the given number of workers until ctx is done.
func (l *Loop[T]) Run(ctx context.Context, workers int) error {
	if workers < 1 {
		l.queue.ShutDown()
		return fmt.Errorf("%s: workers must be at least 1, got %d", l.name, workers)
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

// RunAfterSync waits for the synced caches, then runs the workers as Run
// does. If ctx is done before the caches have synced, it shuts the queue down
// and returns nil without starting any worker. In every case the queue is
// released when it returns.
func (l *Loop[T]) RunAfterSync(ctx context.Context, workers int, synced ...cache.InformerSynced) error {
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		l.queue.ShutDown()
		return nil
	}
	return l.Run(ctx, workers)
}

// next processes one key; false once the queue is shut down.
func (l *Loop[T]) next(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)
	log := logr.FromContextOrDiscard(ctx)
	err := l.safeSync(ctx, key)
	switch {
	case err == nil:
		l.queue.Forget(key)
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

func (l *Loop[T]) safeSync(ctx context.Context, key T) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("sync of %v panicked: %v", key, v)
			logr.FromContextOrDiscard(ctx).Error(err, "Recovered from a panic", "key", key, "stack", string(debug.Stack()))
		}
	}()
	return l.sync(ctx, key)
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that the Loop drops the key instead of retrying.
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
