// Package expectations remembers, per controller key, how many creates and
// which deletes a controller has asked for and not yet seen in its informer
// cache, so that a sync running before those watch events arrive does not
// act a second time.
//
// Guarantees: every method is safe for concurrent use; a key whose
// expectations are met, never recorded, or older than TTL counts as
// satisfied; deletions are tracked by dependent key ("namespace/name"), so a
// delete observed twice (a deletionTimestamp update, then the delete) or a
// delete the controller never asked for lowers nothing.
//
// Non-guarantees: creations are counted, not tracked by name, so an
// unrelated creation observed for the key lowers the count like an expected
// one; nothing here talks to the API server or expires entries by itself
// (an expired entry is simply ignored until it is replaced or deleted).
package expectations

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// TTL is how long recorded expectations are waited for before a key counts
// as satisfied anyway (kube-controller-manager's ExpectationsTimeout), so a
// lost watch event delays a controller by at most this much.
const TTL = 5 * time.Minute

// Expectations is the expectation store of one controller. Create it with
// New.
type Expectations struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	items map[string]*entry
}

// entry is what one controller key waits for.
type entry struct {
	adds    int64
	dels    int64
	delKeys map[string]struct{}
	set     time.Time
}

// New returns an empty store reading time from clk (nil: the real clock).
func New(clk clock.PassiveClock) *Expectations {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Expectations{clock: clk, items: map[string]*entry{}}
}

// Satisfied reports whether the controller may act on key: nothing is
// recorded for it, everything recorded has been observed, or the record is
// older than TTL.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	it, ok := e.items[key]
	if !ok {
		return true
	}
	return it.fulfilled() || e.clock.Since(it.set) > TTL
}

// ExpectCreations replaces key's expectations with n creations.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.items[key] = &entry{adds: int64(n), set: e.clock.Now()}
}

// ExpectDeletions replaces key's expectations with the deletion of each of
// the dependents named by depKeys ("namespace/name").
func (e *Expectations) ExpectDeletions(key string, depKeys []string) {
	dk := make(map[string]struct{}, len(depKeys))
	for _, k := range depKeys {
		dk[k] = struct{}{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.items[key] = &entry{dels: int64(len(dk)), delKeys: dk, set: e.clock.Now()}
}

// CreationObserved lowers key's expected creations by one (also used for a
// creation that was given up: it will never be observed).
func (e *Expectations) CreationObserved(key string) {
	e.LowerCreations(key, 1)
}

// LowerCreations lowers key's expected creations by n.
func (e *Expectations) LowerCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if it, ok := e.items[key]; ok {
		it.adds -= int64(n)
	}
}

// DeletionObserved records that the dependent depKey is gone or going, if
// key was waiting for it; otherwise it does nothing.
func (e *Expectations) DeletionObserved(key, depKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	it, ok := e.items[key]
	if !ok {
		return
	}
	if _, want := it.delKeys[depKey]; want {
		delete(it.delKeys, depKey)
		it.dels--
	}
}

// Delete forgets key, for example when its object is deleted, so that a
// new object of the same name starts clean.
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.items, key)
}

// Pending returns the creations and deletions key still waits for and
// whether anything is recorded for it (expired or not).
func (e *Expectations) Pending(key string) (adds, dels int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	it, ok := e.items[key]
	if !ok {
		return 0, 0, false
	}
	return it.adds, it.dels, true
}

func (it *entry) fulfilled() bool { return it.adds <= 0 && it.dels <= 0 }
