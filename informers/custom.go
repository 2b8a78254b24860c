package informers

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kinformers "k8s.io/client-go/informers"
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
// Shutdown stops it. It is how a controller with a generated clientset
// gets informers that belong to its term: it builds the factory from the
// term's ClientBuilder and adds it. The Set does not strip managedFields
// from such a factory's objects: pass informers.StripManagedFields to its
// WithTransform option.
func (s *Set) AddFactory(f Factory) {
	s.mu.Lock()
	s.factories = append(s.factories, f)
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		f.Start(stop)
	}
}

// Dynamic returns the Set's dynamic informer factory: informers of any
// resource, custom ones included, whose caches hold
// *unstructured.Unstructured, managedFields stripped unless
// KeepManagedFields. It has the Set's lifecycle. Nil when the Set has no
// dynamic client (Options.Dynamic).
func (s *Set) Dynamic() dynamicinformer.DynamicSharedInformerFactory {
	if s.dynamic == nil {
		return nil
	}
	return s.dynamic
}

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

type customKey struct {
	gvr schema.GroupVersionResource
	typ reflect.Type
}

// customFor is Custom for the type newObj makes.
func (s *Set) customFor(gvr schema.GroupVersionResource, newObj func() runtime.Object) (cache.SharedIndexInformer, error) {
	if s.dynamicClient == nil {
		return nil, fmt.Errorf("informers: %v: the Set has no dynamic client (Options.Dynamic)", gvr)
	}
	k := customKey{gvr, reflect.TypeOf(newObj())}
	s.mu.Lock()
	defer s.mu.Unlock()
	if inf, ok := s.custom[k]; ok {
		return inf, nil
	}
	client := s.dynamicClient.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{
		ResyncPeriod: s.resync,
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	strip := !s.keepManagedFields
	if err := inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // a tombstone: its object was converted when stored
		}
		if strip {
			u.SetManagedFields(nil)
		}
		out := newObj()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
			return nil, fmt.Errorf("informers: %v %s/%s into %T: %w", gvr, u.GetNamespace(), u.GetName(), out, err)
		}
		return out, nil
	}); err != nil {
		return nil, err
	}
	s.custom[k] = inf
	if s.runCtx != nil {
		s.runCustomLocked(k, inf)
	}
	return inf, nil
}

// dynamicFactory is the Set's dynamic informer factory: the stripping
// transform set on every informer it hands out.
type dynamicFactory struct {
	dynamicinformer.DynamicSharedInformerFactory
	strip bool
	mu    sync.Mutex
	seen  map[schema.GroupVersionResource]bool
}

func (f *dynamicFactory) ForResource(gvr schema.GroupVersionResource) kinformers.GenericInformer {
	gi := f.DynamicSharedInformerFactory.ForResource(gvr)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.strip && !f.seen[gvr] {
		f.seen[gvr] = true
		// Fails only once the informer runs, when it has its transform.
		_ = gi.Informer().SetTransform(StripManagedFields)
	}
	return gi
}

// runCustomLocked runs a custom informer on the Set's run context; s.mu is
// held.
func (s *Set) runCustomLocked(k customKey, inf cache.SharedIndexInformer) {
	if s.customRunning[k] {
		return
	}
	s.customRunning[k] = true
	s.customWG.Go(func() { inf.RunWithContext(s.runCtx) })
}
