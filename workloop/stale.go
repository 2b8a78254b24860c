package workloop

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// guard is the staleness guard (after KEP-5647): per key, the objects the
// controller wrote and the resourceVersion each write returned. A key with
// a pending write is not synced, because its informers would show the
// world as it was before that write.
type guard struct {
	clock   clock.PassiveClock
	timeout time.Duration

	mu      sync.Mutex
	pending map[string]map[types.UID]write // by loop key
	// keysOf is the set of loop keys with a pending write of each object:
	// one object may be written while syncing several keys, and each of
	// them waits for its own write.
	keysOf map[types.UID]map[string]struct{}
	// seen is the last resourceVersion delivered per object, for the
	// deliveries of the last seenWindow or so: a write whose event beat
	// Wrote (the API server may send the watch event before the response)
	// is recognised as already delivered. Older deliveries are forgotten,
	// so the guard holds no entry per cached object (an informer's initial
	// list of 50,000 pods leaves none behind once the window passed).
	seen map[types.UID]delivery
	// seenPruned is when seen was last pruned.
	seenPruned time.Time
	// gone holds when each object's deletion was delivered, for timeout: a
	// write that let its object go (a patch removing the last finalizer of
	// an object being deleted) may see its deletion delivered before Wrote,
	// and must not wait for a delivery that never comes.
	gone map[types.UID]time.Time
	// pruned is when gone was last pruned.
	pruned time.Time
	// expiredKinds are the Go types of the objects whose writes expired
	// (no delivery within the timeout): the first of each is logged.
	expiredKinds map[string]bool
}

type write struct {
	rv   string
	at   time.Time
	kind string // the object's Go type, for the log line if it expires
	name string // namespace/name
}

// delivery is an informer's delivery of an object at a resourceVersion.
type delivery struct {
	rv string
	at time.Time
}

// seenWindow is how long the guard remembers a delivery for a Wrote that
// comes after it. The race it covers (watch event before the write's
// response) is a scheduling delay; a Wrote later than this after its own
// event holds its key until the object's next delivery or StaleTimeout.
const seenWindow = 10 * time.Second

func newGuard(c clock.PassiveClock, timeout time.Duration) *guard {
	return &guard{
		clock:   c,
		timeout: timeout,
		pending: map[string]map[types.UID]write{},
		keysOf:  map[types.UID]map[string]struct{}{},
		seen:    map[types.UID]delivery{},
		gone:    map[types.UID]time.Time{},
	}
}

// Wrote records that syncing key wrote obj (the object the API server
// returned from a create, update or patch). Until an informer feeding this
// Loop delivers that object at the same or a newer resourceVersion, or its
// deletion, syncs of key are skipped and retried after Options.StaleRetry
// (counted in workloop_stale_syncs_skipped_total). The informer must feed
// the Loop through Watch, or its handler must call Observe. A nil obj
// (typed or not), or one without a UID or resourceVersion, records nothing.
func (l *Loop) Wrote(key string, obj any) {
	if v := reflect.ValueOf(obj); !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetUID() == "" || m.GetResourceVersion() == "" {
		return
	}
	g := l.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	if seen, ok := g.seen[m.GetUID()]; ok && caughtUp(seen.rv, m.GetResourceVersion()) {
		return
	}
	if _, ok := g.gone[m.GetUID()]; ok {
		return
	}
	if g.pending[key] == nil {
		g.pending[key] = map[types.UID]write{}
	}
	g.pending[key][m.GetUID()] = write{rv: m.GetResourceVersion(), at: g.clock.Now(),
		kind: strings.TrimPrefix(fmt.Sprintf("%T", obj), "*"),
		name: cache.NewObjectName(m.GetNamespace(), m.GetName()).String()}
	if g.keysOf[m.GetUID()] == nil {
		g.keysOf[m.GetUID()] = map[string]struct{}{}
	}
	g.keysOf[m.GetUID()][key] = struct{}{}
}

// Observe tells the staleness guard an informer delivered obj (an add or
// update). Watch calls it; a handler registered without Watch calls it
// before it enqueues.
func (l *Loop) Observe(obj any) { l.guard.observe(obj, false) }

// ObserveAdd is Observe for a cache.ResourceEventHandlerDetailedFuncs
// AddFunc: it does not show the guard the informer's initial list (or the
// replay a running informer gives a new handler). A Loop's workers start
// once that list has been delivered, so none of its writes can be in it,
// and remembering it would hold an entry per cached object until the next
// event on it: in a quiet cluster, for good.
func (l *Loop) ObserveAdd(obj any, isInInitialList bool) {
	if !isInInitialList {
		l.Observe(obj)
	}
}

// ObserveDelete tells the staleness guard an informer delivered obj's
// deletion (obj may be a cache.DeletedFinalStateUnknown).
func (l *Loop) ObserveDelete(obj any) { l.guard.observe(obj, true) }

func (g *guard) observe(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetUID() == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if deleted {
		delete(g.seen, m.GetUID())
		g.pruneGone()
		g.gone[m.GetUID()] = g.clock.Now()
	} else {
		now := g.clock.Now()
		g.seen[m.GetUID()] = delivery{rv: m.GetResourceVersion(), at: now}
		g.pruneSeen(now)
	}
	for key := range g.keysOf[m.GetUID()] {
		w := g.pending[key][m.GetUID()]
		if deleted || caughtUp(m.GetResourceVersion(), w.rv) {
			g.forget(key, m.GetUID()) // deleting during range is safe
		}
	}
}

// caughtUp reports whether seen is at or after written. resourceVersions
// that are not well-formed integers cannot be ordered; then any delivery
// counts, so a guard never holds a key on a value it cannot read.
func caughtUp(seen, written string) bool {
	c, err := resourceversion.CompareResourceVersion(seen, written)
	return err != nil || c >= 0
}

// pruneGone drops deletions older than the timeout, at most once per
// timeout, so gone holds about one timeout's worth of deletions.
func (g *guard) pruneGone() {
	now := g.clock.Now()
	if now.Sub(g.pruned) < g.timeout {
		return
	}
	g.pruned = now
	for uid, at := range g.gone {
		if now.Sub(at) >= g.timeout {
			delete(g.gone, uid)
		}
	}
}

// pruneSeen drops deliveries older than seenWindow, at most once per
// window, so seen holds about two windows' worth of deliveries.
func (g *guard) pruneSeen(now time.Time) {
	if now.Sub(g.seenPruned) < seenWindow {
		return
	}
	g.seenPruned = now
	for uid, d := range g.seen {
		if now.Sub(d.at) >= seenWindow {
			delete(g.seen, uid)
		}
	}
}

func (g *guard) seenCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.seen)
}

func (g *guard) goneCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.gone)
}

func (g *guard) forget(key string, uid types.UID) {
	delete(g.keysOf[uid], key)
	if len(g.keysOf[uid]) == 0 {
		delete(g.keysOf, uid)
	}
	delete(g.pending[key], uid)
	if len(g.pending[key]) == 0 {
		delete(g.pending, key)
	}
}

// fresh reports whether key has no pending write younger than the timeout,
// and returns the writes it gave up on: none of their objects was
// delivered within the timeout.
func (g *guard) fresh(key string) (bool, []write) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	var expired []write
	for uid, w := range g.pending[key] {
		if now.Sub(w.at) >= g.timeout {
			g.forget(key, uid)
			expired = append(expired, w)
		}
	}
	return len(g.pending[key]) == 0, expired
}

// firstExpiry reports whether no write of kind expired before on this
// guard, and remembers that one has.
func (g *guard) firstExpiry(kind string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.expiredKinds == nil {
		g.expiredKinds = map[string]bool{}
	}
	first := !g.expiredKinds[kind]
	g.expiredKinds[kind] = true
	return first
}

// Stale reports whether the staleness guard is holding key back: a write
// recorded with Wrote has not yet been delivered by an informer.
func (l *Loop) Stale(key string) bool {
	fresh, _ := l.guard.fresh(key)
	return !fresh
}
