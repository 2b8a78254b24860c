package nodelifecycle

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// evictionBurst is the token bucket's burst in every zone queue, KCM's.
const evictionBurst = 1

// timedNode is a node waiting in a zone's tainting queue.
type timedNode struct {
	name      string
	uid       string
	addedAt   time.Time
	processAt time.Time
}

// nodeHeap orders waiting nodes by processAt.
type nodeHeap []*timedNode

func (h nodeHeap) Len() int           { return len(h) }
func (h nodeHeap) Less(i, j int) bool { return h[i].processAt.Before(h[j].processAt) }
func (h nodeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(x any)        { *h = append(*h, x.(*timedNode)) }
func (h *nodeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// zoneQueue is a zone's rate-limited queue of nodes to taint NoExecute,
// with KCM's semantics: a node is added once until it is removed (taking
// it off the heap after processing it does not forget it: the node is not
// queued again until the controller sees it reachable, or sees its taint
// gone), and every attempt costs a token of the zone's limiter.
type zoneQueue struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	heap    nodeHeap
	members map[string]bool

	limiterMu sync.Mutex
	limiter   flowcontrol.RateLimiter
	newBucket func(qps float32) flowcontrol.RateLimiter
}

func newZoneQueue(c clock.Clock, qps float32) *zoneQueue {
	q := &zoneQueue{clock: c, members: map[string]bool{},
		newBucket: func(qps float32) flowcontrol.RateLimiter {
			return flowcontrol.NewTokenBucketRateLimiterWithClock(qps, evictionBurst, c)
		}}
	q.limiter = q.newBucket(qps)
	return q
}

// add queues name unless it is a member already; true if it was added.
func (q *zoneQueue) add(name, uid string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.members[name] {
		return false
	}
	now := q.clock.Now()
	heap.Push(&q.heap, &timedNode{name: name, uid: uid, addedAt: now, processAt: now})
	q.members[name] = true
	return true
}

// remove forgets name; true if it was a member.
func (q *zoneQueue) remove(name string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.members[name] {
		return false
	}
	delete(q.members, name)
	q.dropLocked(name)
	return true
}

// dropLocked takes name off the heap, leaving its membership.
func (q *zoneQueue) dropLocked(name string) {
	for i, n := range q.heap {
		if n.name == name {
			heap.Remove(&q.heap, i)
			return
		}
	}
}

func (q *zoneQueue) head() (timedNode, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.heap) == 0 {
		return timedNode{}, false
	}
	return *q.heap[0], true
}

// reschedule moves name's entry to processAt.
func (q *zoneQueue) reschedule(name string, processAt time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, n := range q.heap {
		if n.name == name {
			n.processAt = processAt
			heap.Init(&q.heap)
			return
		}
	}
}

func (q *zoneQueue) done(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropLocked(name)
}

// try processes due nodes, one token each, until the limiter refuses, the
// head is not due, or the queue is empty. fn returns whether the node is
// done, else how long until it is tried again.
func (q *zoneQueue) try(fn func(timedNode) (bool, time.Duration)) {
	n, ok := q.head()
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	for ok {
		if !q.limiter.TryAccept() {
			return
		}
		now := q.clock.Now()
		if now.Before(n.processAt) {
			return
		}
		if done, wait := fn(n); done {
			q.done(n.name)
		} else {
			q.reschedule(n.name, now.Add(wait+1))
		}
		n, ok = q.head()
	}
}

// swapLimiter sets the zone's rate: zero or less stops it; a new bucket
// starts empty if the old one was. As in KCM, the rate is compared with
// the limiter's QPS, and a stopped limiter reports 1.
func (q *zoneQueue) swapLimiter(qps float32) {
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	if q.limiter.QPS() == qps {
		return
	}
	var next flowcontrol.RateLimiter
	if qps <= 0 {
		next = flowcontrol.NewFakeNeverRateLimiter()
	} else {
		next = q.newBucket(qps)
		if !q.limiter.TryAccept() {
			next.TryAccept()
		}
	}
	q.limiter.Stop()
	q.limiter = next
}

func (q *zoneQueue) rate() float32 {
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	return q.limiter.QPS()
}
