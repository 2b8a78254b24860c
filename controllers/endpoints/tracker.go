package endpoints

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller maintains (as KCM's)

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// staleTracker remembers, per Endpoints object, the resource version this
// controller last replaced: a cache still holding that version has not
// caught up with the controller's own write.
type staleTracker struct {
	mu       sync.Mutex
	replaced map[types.NamespacedName]string
}

func newStaleTracker() *staleTracker {
	return &staleTracker{replaced: map[types.NamespacedName]string{}}
}

// replacedVersion records that ep's version has been superseded.
func (t *staleTracker) replacedVersion(ep *corev1.Endpoints) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replaced[types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}] = ep.ResourceVersion
}

// stale reports whether ep is a version this controller already replaced.
func (t *staleTracker) stale(ep *corev1.Endpoints) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv, ok := t.replaced[types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}]
	return ok && rv == ep.ResourceVersion
}

func (t *staleTracker) forget(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.replaced, types.NamespacedName{Namespace: namespace, Name: name})
}
