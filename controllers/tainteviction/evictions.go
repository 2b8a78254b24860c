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
	// timed is false for a deletion started at once, without a timer.
	timed bool
	// cancelled is set before the timer is stopped, so that a timer that
	// fired just before does nothing.
	cancelled atomic.Bool

	mu    sync.Mutex
	timer clock.Timer
}

// setTimer keeps t, or stops it if the eviction was cancelled meanwhile.
func (e *eviction) setTimer(t clock.Timer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.timer = t
	if e.cancelled.Load() {
		t.Stop()
	}
}

// stopTimer stops the timer, if it is set already (setTimer stops it
// otherwise). Call it after setting cancelled.
func (e *eviction) stopTimer() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
	}
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
	// busy counts the deletions started and not yet returned.
	busy atomic.Int32
}

func newEvictions(c clock.WithDelayedExecution, evict evictFunc) *evictions {
	return &evictions{clock: c, evict: evict, pending: map[string]*eviction{}}
}

// schedule starts the deletion of key at due (at once when due is not
// after since) unless one is scheduled or running: a scheduled deletion
// is never moved by schedule (cancel it first). Timers are made and
// stopped without holding mu: a fake clock fires its timers holding its
// own lock, and a firing timer takes mu.
func (q *evictions) schedule(ctx context.Context, key string, since, due time.Time) {
	wait := due.Sub(since)
	q.mu.Lock()
	if _, ok := q.pending[key]; ok || q.stopped {
		q.mu.Unlock()
		return
	}
	e := &eviction{since: since, due: due, timed: wait > 0}
	q.pending[key] = e
	if !e.timed {
		q.start(ctx, key, e)
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	e.setTimer(q.clock.AfterFunc(wait, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if e.cancelled.Load() || q.stopped {
			return
		}
		q.start(ctx, key, e)
	}))
}

// start runs e's deletion on a goroutine of its own. Call it holding mu.
func (q *evictions) start(ctx context.Context, key string, e *eviction) {
	q.busy.Add(1)
	q.running.Go(func() {
		defer q.busy.Add(-1)
		q.run(ctx, key, e)
	})
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
	e, ok := q.pending[key]
	if ok {
		delete(q.pending, key)
		ok = e.timed
		if ok {
			e.cancelled.Store(true)
		}
	}
	q.mu.Unlock()
	if ok {
		e.stopTimer()
	}
	return ok
}

// stop cancels every scheduled deletion and waits for those running.
func (q *evictions) stop() {
	q.mu.Lock()
	q.stopped = true
	var timed []*eviction
	for key, e := range q.pending {
		e.cancelled.Store(true)
		if e.timed {
			timed = append(timed, e)
		}
		delete(q.pending, key)
	}
	q.mu.Unlock()
	for _, e := range timed {
		e.stopTimer()
	}
	q.running.Wait()
}

// len is the number of deletions scheduled or running.
func (q *evictions) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}
