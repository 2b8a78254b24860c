package shardgroup

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/ctrlhost/ctrlhost/shard"
)

// ScopeFunc reports whether a resource is namespaced (from discovery),
// asking no longer than ctx allows.
type ScopeFunc func(ctx context.Context,
	gvr schema.GroupVersionResource) (namespaced bool, err error)

// Dynamic is a dynamic client whose lists and watches hold only a set of
// slots' objects, for the informers of custom resources (and any other
// resource read through the dynamic client) in a slot term: every
// resource under shard.ByUID; under shard.ByNamespace, namespaced
// resources, and Namespaces by name. Cluster-scoped resources other than
// Namespaces have no namespace to key by and pass unfiltered under
// ByNamespace, as they do in a typed Clientset. Everything but list and
// watch goes to the inner client as it is.
type Dynamic struct {
	dynamic.Interface
	bySlot, byName *selection
	scope          ScopeFunc

	mu       sync.Mutex
	statuses map[schema.GroupVersionResource]*counters
}

// NewDynamic returns inner filtered to slots of space; scope tells which
// resources are namespaced (a list or watch fails while it fails).
func NewDynamic(
	inner dynamic.Interface,
	space shard.Space,
	slots []int,
	scope ScopeFunc,
) (*Dynamic, error) {
	bySlot, err := newSelection(space, slots, false)
	if err != nil {
		return nil, err
	}
	byName, err := newSelection(space, slots, true)
	if err != nil {
		return nil, err
	}
	return &Dynamic{Interface: inner, bySlot: bySlot, byName: byName, scope: scope,
		statuses: map[schema.GroupVersionResource]*counters{}}, nil
}

// IsWatchListSemanticsUnSupported passes on what the inner client says (a
// fake cannot stream lists), so that informers over the Dynamic list as
// they would over it.
func (d *Dynamic) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(d.Interface)
}

// Dropped returns how many objects of gvr the client had to drop because
// the server did not apply the selector.
func (d *Dynamic) Dropped(
	gvr schema.GroupVersionResource,
) int64 {
	return d.status(gvr).dropped.Load()
}

func (d *Dynamic) status(gvr schema.GroupVersionResource) *counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.statuses[gvr]
	if !ok {
		c = &counters{}
		d.statuses[gvr] = c
	}
	return c
}

// Resource filters gvr's lists and watches.
func (d *Dynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	inner := d.Interface.Resource(gvr)
	return &dynamicResource{
		NamespaceableResourceInterface: inner,
		lw:                             listWatch{d: d, gvr: gvr, ri: inner},
	}
}

// selectionFor is the selection gvr's objects are filtered by; nil when
// they pass unfiltered.
func (d *Dynamic) selectionFor(ctx context.Context,
	gvr schema.GroupVersionResource) (*selection, error) {
	if d.bySlot.space.Keying == shard.ByUID {
		return d.bySlot, nil
	}
	if gvr.Group == "" && gvr.Resource == "namespaces" {
		return d.byName, nil
	}
	namespaced, err := d.scope(ctx, gvr)
	if err != nil {
		return nil, fmt.Errorf("shard: is %v namespaced: %w", gvr, err)
	}
	if !namespaced {
		return nil, nil
	}
	return d.bySlot, nil
}

// listWatch is the filtered list and watch of one resource, cluster-wide
// or in one namespace; ri is the inner client's for that scope.
type listWatch struct {
	d   *Dynamic
	gvr schema.GroupVersionResource
	ri  dynamic.ResourceInterface
}

// dynamicResource is a resource of a Dynamic, cluster-wide.
type dynamicResource struct {
	dynamic.NamespaceableResourceInterface
	lw listWatch
}

func (r *dynamicResource) Namespace(ns string) dynamic.ResourceInterface {
	ri := r.NamespaceableResourceInterface.Namespace(ns)
	return &namespacedResource{
		ResourceInterface: ri,
		lw:                listWatch{d: r.lw.d, gvr: r.lw.gvr, ri: ri},
	}
}

func (r *dynamicResource) List(
	ctx context.Context,
	o metav1.ListOptions,
) (*unstructured.UnstructuredList, error) {
	return r.lw.list(ctx, o)
}

func (r *dynamicResource) Watch(
	ctx context.Context,
	o metav1.ListOptions,
) (watch.Interface, error) {
	return r.lw.watch(ctx, o)
}

// namespacedResource is a resource of a Dynamic in one namespace.
type namespacedResource struct {
	dynamic.ResourceInterface
	lw listWatch
}

func (r *namespacedResource) List(
	ctx context.Context,
	o metav1.ListOptions,
) (*unstructured.UnstructuredList, error) {
	return r.lw.list(ctx, o)
}

func (r *namespacedResource) Watch(
	ctx context.Context,
	o metav1.ListOptions,
) (watch.Interface, error) {
	return r.lw.watch(ctx, o)
}

// filter is the Filter of the lists and watches; nil when unfiltered.
func (l listWatch) filter(ctx context.Context) (*Filter, error) {
	sel, err := l.d.selectionFor(ctx, l.gvr)
	if sel == nil || err != nil {
		return nil, err
	}
	f := sel.over(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return l.ri.List(ctx, o)
		},
		WatchFuncWithContext: l.ri.Watch,
	})
	f.shared = l.d.status(l.gvr)
	return f, nil
}

func (l listWatch) list(
	ctx context.Context,
	o metav1.ListOptions,
) (*unstructured.UnstructuredList, error) {
	f, err := l.filter(ctx)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return l.ri.List(ctx, o)
	}
	obj, err := f.ListWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*unstructured.UnstructuredList)
	if !ok {
		return nil, fmt.Errorf("shard: %v list is a %T", l.gvr, obj)
	}
	return list, nil
}

func (l listWatch) watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	f, err := l.filter(ctx)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return l.ri.Watch(ctx, o)
	}
	return f.WatchWithContext(ctx, o)
}
