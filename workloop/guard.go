package workloop

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// LastSyncRV is what a Guard reads from an informer's store: client-go's
// cache.Store has it (informer.GetStore()).
type LastSyncRV interface {
	LastStoreSyncResourceVersion() string
}

// Guard is a staleness guard (KEP-5647): a controller tells it the
// resourceVersion of each write it made on behalf of a key; until the
// informer of that resource has synced past it, a Loop with this Guard does
// not sync the key, so it never acts on a cache that does not show its own
// last write yet (and, for instance, creates pods twice). Keys are
// namespace/name strings.
//
// resourceVersions are compared as the API server's integers
// (k8s.io/apimachinery/pkg/util/resourceversion); a version that does not
// parse as one never holds a key back. Safe for concurrent use.
type Guard struct {
	stores map[schema.GroupResource]LastSyncRV

	mu     sync.Mutex
	writes map[string]*written
}

type written struct {
	uid types.UID
	rv  map[schema.GroupResource]string
}

// NewGuard returns a Guard over the given informers' stores, one per
// resource the controller writes.
func NewGuard(stores map[schema.GroupResource]LastSyncRV) *Guard {
	return &Guard{stores: stores, writes: map[string]*written{}}
}

// WroteAt records that a write on behalf of key (whose object has uid)
// was given resourceVersion rv for resource. A write for a different uid
// (the object was deleted and created again) replaces what was recorded.
func (g *Guard) WroteAt(key string, uid types.UID, resource schema.GroupResource, rv string) {
	if g == nil || rv == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.writes[key]
	if w == nil || (uid != "" && w.uid != "" && w.uid != uid) {
		w = &written{uid: uid, rv: map[schema.GroupResource]string{}}
		g.writes[key] = w
	}
	if w.uid == "" {
		w.uid = uid
	}
	if prev, ok := w.rv[resource]; ok {
		if c, err := resourceversion.CompareResourceVersion(prev, rv); err == nil && c > 0 {
			return // keep the newer
		}
	}
	w.rv[resource] = rv
}

// Clear forgets key's writes, for example when its object was deleted. A
// non-empty uid clears only writes recorded for that uid.
func (g *Guard) Clear(key string, uid types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.writes[key]; w != nil && (uid == "" || w.uid == "" || w.uid == uid) {
		delete(g.writes, key)
	}
}

// Stale returns the resource whose informer has not yet synced past key's
// last write there, and whether there is one. Writes the informers have
// caught up with are forgotten.
func (g *Guard) Stale(key string) (schema.GroupResource, bool) {
	if g == nil {
		return schema.GroupResource{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.writes[key]
	if w == nil {
		return schema.GroupResource{}, false
	}
	for res, rv := range w.rv {
		store := g.stores[res]
		if store == nil {
			delete(w.rv, res)
			continue
		}
		c, err := resourceversion.CompareResourceVersion(store.LastStoreSyncResourceVersion(), rv)
		if err != nil || c >= 0 {
			delete(w.rv, res)
			continue
		}
		return res, true
	}
	delete(g.writes, key)
	return schema.GroupResource{}, false
}

// check is Stale for a Loop's key: "" when the key may be synced, else the
// resource that holds it back. Keys that are not strings are never held.
func (g *Guard) check(key any) string {
	k, ok := key.(string)
	if !ok {
		return ""
	}
	if res, stale := g.Stale(k); stale {
		return res.String()
	}
	return ""
}
