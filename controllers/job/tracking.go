package job

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// uidExpectations remembers, per Job key, the pods whose tracking
// finalizer this controller removed and whose removal the informer has not
// shown yet. Such pods are counted already: a sync must not count them
// again. Safe for concurrent use.
type uidExpectations struct {
	mu   sync.Mutex
	uids map[string]map[types.UID]struct{}
}

func newUIDExpectations() *uidExpectations {
	return &uidExpectations{uids: map[string]map[types.UID]struct{}{}}
}

// expected returns a copy of the pods key waits for (nil when none).
func (u *uidExpectations) expected(key string) map[types.UID]struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	set, ok := u.uids[key]
	if !ok {
		return nil
	}
	out := make(map[types.UID]struct{}, len(set))
	for uid := range set {
		out[uid] = struct{}{}
	}
	return out
}

// expect adds uids to what key waits for.
func (u *uidExpectations) expect(key string, uids []types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	set, ok := u.uids[key]
	if !ok {
		set = map[types.UID]struct{}{}
		u.uids[key] = set
	}
	for _, uid := range uids {
		set[uid] = struct{}{}
	}
}

// observed records that uid's finalizer is gone (or will not go).
func (u *uidExpectations) observed(key string, uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if set, ok := u.uids[key]; ok {
		delete(set, uid)
	}
}

// forget drops everything key waits for.
func (u *uidExpectations) forget(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.uids, key)
}
