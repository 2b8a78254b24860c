package workloop

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// KeysFunc turns an object from an informer event into the keys to sync.
// The object is never a tombstone: Watch unwraps DeletedFinalStateUnknown.
type KeysFunc[K comparable] func(obj metav1.Object) []K

// EventType says what happened to an object.
type EventType int

const (
	Added EventType = iota
	Updated
	Deleted
)

// Event is one informer event. Old is set for Updated only; Object is the
// new object (for Deleted, the last known state).
type Event struct {
	Type   EventType
	Old    metav1.Object
	Object metav1.Object
}

// Filter decides whether an event enqueues anything; all of a Watch's
// filters must pass.
type Filter func(Event) bool

// Watch registers a handler on informer that turns every event that passes
// filters into keys with keys and adds them, and makes Run wait for the
// handler to have synced. Call it before Run, typically in the InitFunc.
func (l *Loop[K]) Watch(informer cache.SharedInformer, keys KeysFunc[K], filters ...Filter) error {
	if informer == nil || keys == nil {
		return fmt.Errorf("workloop %s: Watch needs an informer and a keys function", l.name)
	}
	handle := func(e Event) {
		if e.Object == nil {
			return
		}
		for _, f := range filters {
			if !f(e) {
				return
			}
		}
		for _, k := range keys(e.Object) {
			l.queue.Add(k)
		}
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { handle(Event{Type: Added, Object: asObject(obj)}) },
		UpdateFunc: func(old, obj any) {
			handle(Event{Type: Updated, Old: asObject(old), Object: asObject(obj)})
		},
		DeleteFunc: func(obj any) { handle(Event{Type: Deleted, Object: asObject(obj)}) },
	})
	if err != nil {
		return fmt.Errorf("workloop %s: adding an event handler: %w", l.name, err)
	}
	l.WaitFor(reg.HasSynced)
	return nil
}

// asObject unwraps a tombstone; nil when obj has no object metadata.
func asObject(obj any) metav1.Object {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, _ := obj.(metav1.Object)
	return m
}

// key is the namespace/name key of o, as cache.MetaNamespaceKeyFunc makes it.
func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// EnqueueKey enqueues the object's own namespace/name key (name alone for
// cluster-scoped objects), the key listers' Get takes after
// cache.SplitMetaNamespaceKey.
func EnqueueKey() KeysFunc[string] {
	return func(o metav1.Object) []string { return []string{key(o.GetNamespace(), o.GetName())} }
}

// EnqueueOwner enqueues the key of the object's controller (the owner
// reference with controller=true) when it is of the given group and kind;
// the owner is taken to be in the object's namespace, as owner references
// require.
func EnqueueOwner(owner schema.GroupKind) KeysFunc[string] {
	return func(o metav1.Object) []string {
		ref := metav1.GetControllerOfNoCopy(o)
		if ref == nil {
			return nil
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != owner.Group || ref.Kind != owner.Kind {
			return nil
		}
		return []string{key(o.GetNamespace(), ref.Name)}
	}
}

// EnqueueMapped enqueues whatever keys f gives for the object, for
// relations other than ownership (an annotation naming the source, a
// label selecting a parent).
func EnqueueMapped[K comparable](f func(metav1.Object) []K) KeysFunc[K] { return f }

// InNamespace passes events of objects in one of the namespaces.
func InNamespace(namespaces ...string) Filter {
	return func(e Event) bool {
		for _, ns := range namespaces {
			if e.Object.GetNamespace() == ns {
				return true
			}
		}
		return false
	}
}

// WithLabels passes events of objects whose labels match selector. An
// update passes when the old or the new object matches, so that an object
// leaving the selection is seen too.
func WithLabels(selector labels.Selector) Filter {
	return func(e Event) bool {
		if selector.Matches(labels.Set(e.Object.GetLabels())) {
			return true
		}
		return e.Old != nil && selector.Matches(labels.Set(e.Old.GetLabels()))
	}
}

// GenerationChanged passes adds, deletes, and updates that changed
// metadata.generation (the spec), dropping status-only updates and resyncs.
func GenerationChanged() Filter {
	return func(e Event) bool {
		return e.Type != Updated || e.Old.GetGeneration() != e.Object.GetGeneration()
	}
}

// ResourceVersionChanged passes adds, deletes, and updates that changed the
// object, dropping the periodic resyncs in which nothing did.
func ResourceVersionChanged() Filter {
	return func(e Event) bool {
		return e.Type != Updated || e.Old.GetResourceVersion() != e.Object.GetResourceVersion()
	}
}
