package informers

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// Factory is an informer factory a Set can start, wait for and shut down
// with its own: a generated clientset's SharedInformerFactory is one.
type Factory interface {
	Start(stop <-chan struct{})
	Shutdown()
	WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool
}

// AddFactory makes f part of the Set: Start starts it (at once if the Set
// has started), Synced, WaitForCacheSync and readiness wait for it,
// Shutdown stops it; added through a view (For), it is that user's, shut
// down when the user is released. It is how a controller with a generated
// clientset gets informers that belong to its term: it builds the factory
// from the term's ClientBuilder and adds it. The Set does not strip
// managedFields from such a factory's objects: pass
// informers.StripManagedFields to its WithTransform option.
func (s *Set) AddFactory(f Factory) { s.c.addFactory(f, s.holder) }

// Custom returns the Set's informer of gvr whose cache holds *T: objects
// listed and watched through the dynamic client and converted, once as
// they arrive, into the Go type T (by its JSON field tags, as
// runtime.DefaultUnstructuredConverter does), managedFields stripped
// unless KeepManagedFields. It is for custom resources without generated
// clients: T is the resource's Go type, with DeepCopyObject. Calls with
// the same gvr and T return the same informer; it has the Set's lifecycle,
// and k8s.io/client-go/listers.New[*T] makes a typed lister of it. An
// error when the Set has no dynamic client.
//
// A descriptor that declares gvr (WithInformers) together with a T
// (WithObjectType) gets this informer kept warm under warm standby.
func Custom[T any, PT interface {
	*T
	runtime.Object
}](s *Set, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	return s.customFor(gvr, func() runtime.Object { return PT(new(T)) })
}

// customFor is Custom for the type newObj makes.
func (s *Set) customFor(gvr schema.GroupVersionResource,
	newObj func() runtime.Object) (cache.SharedIndexInformer, error) {
	c := s.c
	if c.dynamic == nil {
		return nil, fmt.Errorf("informers: %v: the Set has no dynamic client (Options.Dynamic)", gvr)
	}
	k := key{kind: customKind, gvr: gvr, typ: reflect.TypeOf(newObj())}
	mk := func() (cache.SharedIndexInformer, kinformers.GenericInformer) {
		return newCustom(c, gvr, newObj), nil
	}
	return s.handOut(c.acquire(k, s.holder, mk)), nil
}

// newCustom makes the custom informer of gvr, converting each object into
// the type newObj makes.
func newCustom(c *core, gvr schema.GroupVersionResource,
	newObj func() runtime.Object) cache.SharedIndexInformer {
	client := c.dynamic.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{
			ResyncPeriod: c.resync,
			Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		})
	strip := c.strip
	// Fails only on a running informer, and this one is new.
	_ = inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // a tombstone: its object was converted when stored
		}
		if strip {
			u.SetManagedFields(nil)
		}
		out := newObj()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
			return nil, fmt.Errorf("informers: %v %s/%s into %T: %w", gvr, u.GetNamespace(),
				u.GetName(), out, err)
		}
		return out, nil
	})
	return inf
}

// gvrFactory is a Set's metadata-only or dynamic informer factory, as one
// holder sees it: the two have one interface, informers keyed by resource.
type gvrFactory struct {
	s    *Set
	kind kind // metadataKind or dynamicKind
}

func (f gvrFactory) ForResource(gvr schema.GroupVersionResource) kinformers.GenericInformer {
	c := f.s.c
	mk := func() (cache.SharedIndexInformer, kinformers.GenericInformer) {
		indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
		var gi kinformers.GenericInformer
		if f.kind == metadataKind {
			gi = metadatainformer.NewFilteredMetadataInformer(c.metadata, gvr, "", c.resync,
				indexers, nil)
		} else {
			gi = dynamicinformer.NewFilteredDynamicInformer(c.dynamic, gvr, "", c.resync,
				indexers, nil)
		}
		return gi.Informer(), gi
	}
	return f.s.handOutGeneric(c.acquire(key{kind: f.kind, gvr: gvr}, f.s.holder, mk))
}

// Start starts the Set's informers not started yet (Set.Start).
func (f gvrFactory) Start(stop <-chan struct{}) { f.s.c.start(stop) }

// Shutdown does nothing: the Set's Shutdown stops its informers.
func (f gvrFactory) Shutdown() {}

// WaitForCacheSync waits for the factory's started informers.
func (f gvrFactory) WaitForCacheSync(
	stop <-chan struct{}) map[schema.GroupVersionResource]bool {
	return byResource(waitSynced(stop, f.s.c.startedOf(f.kind, "")))
}

// byResource keys a waitSynced result by resource.
func byResource(synced map[*entry]bool) map[schema.GroupVersionResource]bool {
	out := make(map[schema.GroupVersionResource]bool, len(synced))
	for e, ok := range synced {
		out[e.gvr] = ok
	}
	return out
}
