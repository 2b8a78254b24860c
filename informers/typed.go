package informers

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	coreinformers "k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
)

// typedFactory is a Set's typed informer factory of one namespace ("" for
// all), as one view's user sees it. client-go's generated group accessors
// (Core().V1().Pods() and the rest) ask it for their informers through
// InformerFor, so every typed informer is the Set's and counted for the
// user.
type typedFactory struct {
	s         *Set
	namespace string
	// probe, when set, only records the object InformerFor is asked for
	// (typedResources walks the accessors with it).
	probe func(runtime.Object)
}

var _ kinformers.SharedInformerFactory = (*typedFactory)(nil)

func (f *typedFactory) InformerFor(obj runtime.Object,
	newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	if f.probe != nil {
		f.probe(obj)
		return nil
	}
	c := f.s.c
	k := key{kind: typedKind, namespace: f.namespace, typ: reflect.TypeOf(obj)}
	mk := func() (cache.SharedIndexInformer, kinformers.GenericInformer) {
		return newFunc(c.client, c.resync), nil
	}
	return f.s.handOut(c.acquire(k, f.s.holder, mk))
}

// InformerName is nil: the Set's informers carry no name for client-go's
// informer metrics.
func (f *typedFactory) InformerName() *cache.InformerName { return nil }

// ForResource returns the informer of gvr from its generated accessor, as
// client-go's factory does, and an error for a resource client-go has no
// typed informer for.
func (f *typedFactory) ForResource(
	gvr schema.GroupVersionResource) (kinformers.GenericInformer, error) {
	r, ok := typedResources()[gvr]
	if !ok {
		return nil, fmt.Errorf("no informer found for %v", gvr)
	}
	v := reflect.ValueOf(kinformers.SharedInformerFactory(f))
	for _, m := range r.path {
		v = v.MethodByName(m).Call(nil)[0]
	}
	inf := v.MethodByName("Informer").Call(nil)[0].Interface().(cache.SharedIndexInformer)
	if f.probe != nil {
		return nil, nil
	}
	return genericInformer{inf, cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource())}, nil
}

// Start starts the Set's informers not started yet (Set.Start).
func (f *typedFactory) Start(stop <-chan struct{}) { f.s.c.start(stop) }

// StartWithContext is Start with ctx's Done channel.
func (f *typedFactory) StartWithContext(ctx context.Context) { f.s.c.start(ctx.Done()) }

// Shutdown does nothing: the Set's Shutdown stops its informers.
func (f *typedFactory) Shutdown() {}

// WaitForCacheSync waits for the started typed informers of the factory's
// namespace, as client-go's factory does for its own.
func (f *typedFactory) WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool {
	out := map[reflect.Type]bool{}
	for e, ok := range waitSynced(stop, f.s.c.startedOf(typedKind, f.namespace)) {
		if prev, seen := out[e.typ]; !seen || prev {
			out[e.typ] = ok // every variant of a type must have synced
		}
	}
	return out
}

// WaitForCacheSyncWithContext is WaitForCacheSync with a context, and the
// cause of its end as the error when one has not synced.
func (f *typedFactory) WaitForCacheSyncWithContext(ctx context.Context) cache.SyncResult {
	res := cache.SyncResult{Synced: f.WaitForCacheSync(ctx.Done())}
	for _, ok := range res.Synced {
		if !ok {
			res.Err = context.Cause(ctx)
		}
	}
	return res
}

// The group accessors hand the generated informers this factory, so that
// each asks it for its informer (InformerFor).

func (f *typedFactory) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(f, f.namespace, nil)
}

func (f *typedFactory) Internal() apiserverinternal.Interface {
	return apiserverinternal.New(f, f.namespace, nil)
}

func (f *typedFactory) Apps() apps.Interface {
	return apps.New(f, f.namespace, nil)
}

func (f *typedFactory) Autoscaling() autoscaling.Interface {
	return autoscaling.New(f, f.namespace, nil)
}

func (f *typedFactory) Batch() batch.Interface {
	return batch.New(f, f.namespace, nil)
}

func (f *typedFactory) Certificates() certificates.Interface {
	return certificates.New(f, f.namespace, nil)
}

func (f *typedFactory) Coordination() coordination.Interface {
	return coordination.New(f, f.namespace, nil)
}

func (f *typedFactory) Core() coreinformers.Interface {
	return coreinformers.New(f, f.namespace, nil)
}

func (f *typedFactory) Discovery() discovery.Interface {
	return discovery.New(f, f.namespace, nil)
}

func (f *typedFactory) Events() events.Interface {
	return events.New(f, f.namespace, nil)
}

func (f *typedFactory) Extensions() extensions.Interface {
	return extensions.New(f, f.namespace, nil)
}

func (f *typedFactory) Flowcontrol() flowcontrol.Interface {
	return flowcontrol.New(f, f.namespace, nil)
}

func (f *typedFactory) Lifecycle() lifecycle.Interface {
	return lifecycle.New(f, f.namespace, nil)
}

func (f *typedFactory) Networking() networking.Interface {
	return networking.New(f, f.namespace, nil)
}

func (f *typedFactory) Node() node.Interface {
	return node.New(f, f.namespace, nil)
}

func (f *typedFactory) Policy() policy.Interface {
	return policy.New(f, f.namespace, nil)
}

func (f *typedFactory) Rbac() rbac.Interface {
	return rbac.New(f, f.namespace, nil)
}

func (f *typedFactory) Resource() resource.Interface {
	return resource.New(f, f.namespace, nil)
}

func (f *typedFactory) Scheduling() scheduling.Interface {
	return scheduling.New(f, f.namespace, nil)
}

func (f *typedFactory) Storage() storage.Interface {
	return storage.New(f, f.namespace, nil)
}

func (f *typedFactory) Storagemigration() storagemigration.Interface {
	return storagemigration.New(f, f.namespace, nil)
}

// genericInformer is an informer with its generic lister.
type genericInformer struct {
	inf    cache.SharedIndexInformer
	lister cache.GenericLister
}

func (g genericInformer) Informer() cache.SharedIndexInformer { return g.inf }
func (g genericInformer) Lister() cache.GenericLister         { return g.lister }

// typedResource is how a typed informer is made: the accessor path (group,
// version, resource methods, as Core, V1, Pods), and the Go struct type of
// its objects.
type typedResource struct {
	path [3]string
	typ  reflect.Type
}

// typedResources maps each resource client-go has a typed informer for to
// how it is made (typedResource). It is read from the factory interface itself: each
// accessor's object gives the group and version (client-go's scheme), and
// the resource is the accessor's name in lower case, as client-go's own
// ForResource names them (TestTypedResourcesMatchClientGo checks every
// one against it).
var typedResources = sync.OnceValue(func() map[schema.GroupVersionResource]typedResource {
	var seen runtime.Object
	probe := &typedFactory{probe: func(obj runtime.Object) { seen = obj }}
	out := map[schema.GroupVersionResource]typedResource{}
	factory := reflect.ValueOf(kinformers.SharedInformerFactory(probe))
	ft := reflect.TypeFor[kinformers.SharedInformerFactory]()
	for i := range ft.NumMethod() {
		g := ft.Method(i)
		if g.Type.NumIn() != 0 || g.Type.NumOut() != 1 ||
			g.Type.Out(0).Kind() != reflect.Interface {
			continue
		}
		group := factory.MethodByName(g.Name).Call(nil)[0]
		for j := range group.NumMethod() {
			v := group.Type().Method(j)
			if !strings.HasPrefix(v.Name, "V") {
				continue
			}
			version := group.Method(j).Call(nil)[0]
			for k := range version.NumMethod() {
				r := version.Type().Method(k).Name
				informer := version.Method(k).Call(nil)[0].MethodByName("Informer")
				if !informer.IsValid() {
					continue
				}
				seen = nil
				informer.Call(nil)
				if seen == nil {
					continue
				}
				kinds, _, err := scheme.Scheme.ObjectKinds(seen)
				if err != nil || len(kinds) == 0 {
					continue
				}
				gvr := kinds[0].GroupVersion().WithResource(strings.ToLower(r))
				out[gvr] = typedResource{[3]string{g.Name, v.Name, r},
					reflect.TypeOf(seen).Elem()}
			}
		}
	}
	return out
})
