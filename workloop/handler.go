package workloop

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Mapper turns an object from an informer into the keys to sync. The
// object is never a tombstone: Watch unwraps cache.DeletedFinalStateUnknown
// first. A Mapper must not modify the object.
type Mapper func(obj any) []string

// Filter decides whether an event enqueues. old is nil for adds and
// deletes; obj is the new or deleted object.
type Filter func(old, obj any) bool

// Watch registers a handler on inf that passes each add, update and delete
// through the filters (all must pass) and enqueues the keys m returns; for
// an update, the keys of the old object too, so a changed owner or label
// reaches both. Run waits for the registration to sync. Watch also feeds
// the staleness guard (every delivery but the initial list's).
func (l *Loop) Watch(inf cache.SharedInformer, m Mapper, filters ...Filter) error {
	if m == nil {
		return fmt.Errorf("%s: Watch: the Mapper is nil; pass one such as EnqueueKey()", l.name)
	}
	for i, f := range filters {
		if f == nil {
			return fmt.Errorf("%s: Watch: filter %d is nil; leave it out to pass every event",
				l.name, i)
		}
	}
	enqueue := func(old, obj any) {
		for _, f := range filters {
			if !f(old, obj) {
				return
			}
		}
		for _, o := range []any{old, obj} {
			if o == nil {
				continue
			}
			for _, k := range m(o) {
				l.queue.Add(k)
			}
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			l.ObserveAdd(obj, isInInitialList)
			enqueue(nil, obj)
		},
		UpdateFunc: func(old, obj any) {
			l.Observe(obj)
			enqueue(old, obj)
		},
		DeleteFunc: func(obj any) {
			l.ObserveDelete(obj)
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			enqueue(nil, obj)
		},
	})
	if err != nil {
		return fmt.Errorf("%s: adding event handler: %w", l.name, err)
	}
	l.mu.Lock()
	l.checkers = append(l.checkers, reg.HasSyncedChecker())
	l.mu.Unlock()
	return nil
}

// EnqueueKey maps an object to its own "namespace/name" key ("name" for
// cluster-scoped objects).
func EnqueueKey() Mapper {
	return func(obj any) []string {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return nil
		}
		return []string{key}
	}
}

// EnqueueOwner maps an object to the key of its controller owner (the
// ownerReference with controller=true) when that owner has the group and
// kind of owner; the version is ignored. The owner is in the object's
// namespace, as ownerReferences require.
func EnqueueOwner(owner schema.GroupVersionKind) Mapper {
	return func(obj any) []string {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil
		}
		for _, ref := range m.GetOwnerReferences() {
			if ref.Controller == nil || !*ref.Controller {
				continue
			}
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || gv.Group != owner.Group || ref.Kind != owner.Kind {
				return nil
			}
			if m.GetNamespace() == "" {
				return []string{ref.Name}
			}
			return []string{m.GetNamespace() + "/" + ref.Name}
		}
		return nil
	}
}

// EnqueueMapped maps an object to the keys f returns, for relations that
// are not ownership (an annotation or label naming another object).
func EnqueueMapped(f func(obj any) []string) Mapper { return Mapper(f) }

// InNamespace passes objects in one of the namespaces.
func InNamespace(namespaces ...string) Filter {
	return func(_, obj any) bool {
		m, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		for _, ns := range namespaces {
			if m.GetNamespace() == ns {
				return true
			}
		}
		return false
	}
}

// MatchingLabels passes objects whose labels match sel; for an update,
// either the old or the new labels, so an object leaving the selection
// is still synced.
func MatchingLabels(sel labels.Selector) Filter {
	match := func(obj any) bool {
		m, err := meta.Accessor(obj)
		return err == nil && sel.Matches(labels.Set(m.GetLabels()))
	}
	return func(old, obj any) bool { return match(obj) || (old != nil && match(old)) }
}

// GenerationChanged passes adds, deletes, and updates that changed
// metadata.generation (spec changes, for resources that count them).
func GenerationChanged() Filter {
	return func(old, obj any) bool {
		if old == nil {
			return true
		}
		o, err1 := meta.Accessor(old)
		n, err2 := meta.Accessor(obj)
		return err1 != nil || err2 != nil || o.GetGeneration() != n.GetGeneration()
	}
}

// ResourceVersionChanged passes adds, deletes, and updates whose
// resourceVersion changed, so periodic resyncs (which redeliver the same
// object) enqueue nothing.
func ResourceVersionChanged() Filter {
	return func(old, obj any) bool {
		if old == nil {
			return true
		}
		o, err1 := meta.Accessor(old)
		n, err2 := meta.Accessor(obj)
		return err1 != nil || err2 != nil || o.GetResourceVersion() != n.GetResourceVersion()
	}
}

// Object returns obj as a T, or, when obj is the tombstone an informer
// hands a delete handler for a deletion it missed
// (cache.DeletedFinalStateUnknown), the last state it carries as a T.
func Object[T any](obj any) (T, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	v, ok := obj.(T)
	return v, ok
}
