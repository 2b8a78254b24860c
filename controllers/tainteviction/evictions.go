package tainteviction

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// evictFunc deletes the pod key ("namespace/name") whose eviction was due
// at due.
type evictFunc func(ctx context.Context, key string, due time.Time) error

// eviction is one pod's scheduled deletion.
type eviction struct {
	// since is when the pod's toleration started counting; due is when
	// the deletion is to start.
	since, due time.Time
	// timer is nil for a deletion started at once, without waiting.
	timer clock.Timer
	// cancelled is set before the timer is stopped, so that a timer that
	// fired just before does nothing.
	cancelled atomic.Bool
}

// evictions holds the scheduled deletions, one per pod, each on a timer
// of the clock. A deletion stays in it, started, until it returns.
type evictions struct {
	clock clock.WithDelayedExecution
	evict evictFunc

	mu      sync.Mutex
	pending map[string]*eviction
	stopped bool
	running sync.WaitGroup
}

func newEvictions(c clock.WithDelayedExecution, evict evictFunc) *evictions {
	return &evictions{clock: c, evict: evict, pending: map[string]*eviction{}}
}

// schedule starts the deletion of key at due (at once when due is not
// after since) unless one is scheduled or running: a scheduled deletion
// is never moved by schedule (cancel it first).
func (q *evictions) schedule(ctx context.Context, key string, since, due time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.pending[key]; ok || q.stopped {
		return
	}
	e := &eviction{since: since, due: due}
	q.pending[key] = e
	start := func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if e.cancelled.Load() || q.stopped {
			return
		}
		q.running.Go(func() { q.run(ctx, key, e) })
	}
	if wait := due.Sub(since); wait > 0 {
		e.timer = q.clock.AfterFunc(wait, start)
		return
	}
	q.running.Go(func() { q.run(ctx, key, e) })
}

// run deletes key, then forgets e unless it was replaced meanwhile.
func (q *evictions) run(ctx context.Context, key string, e *eviction) {
	if e.cancelled.Load() {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	if err := q.evict(ctx, key, e.due); err != nil {
		log.Error(err, "Failed to delete a pod for its NoExecute taints", "pod", key)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending[key] == e {
		delete(q.pending, key)
	}
}

// scheduled returns key's deletion, nil if none is scheduled or running.
func (q *evictions) scheduled(key string) *eviction {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending[key]
}

// cancel forgets key's deletion; true if one was waiting on its timer (a
// deletion started at once is forgotten but not cancelled, and says
// false, as in KCM).
func (q *evictions) cancel(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.pending[key]
	if !ok {
		return false
	}
	delete(q.pending, key)
	if e.timer == nil {
		return false
	}
	e.cancelled.Store(true)
	e.timer.Stop()
	return true
}

// stop cancels every scheduled deletion and waits for those running.
func (q *evictions) stop() {
	q.mu.Lock()
	q.stopped = true
	for key, e := range q.pending {
		e.cancelled.Store(true)
		if e.timer != nil {
			e.timer.Stop()
		}
		delete(q.pending, key)
	}
	q.mu.Unlock()
	q.running.Wait()
}

// len is the number of deletions scheduled or running.
func (q *evictions) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}
