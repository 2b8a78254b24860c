package shard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Filter is a cache.ListerWatcher that holds only the objects of a set of
// slots: it asks the API server for them (ListOptions.ShardSelector) and
// drops whatever else the server sends, so that it is correct on a server
// that ignores the selector (ShardedListAndWatch off, or older than
// v1.36). Bookmarks and errors pass through.
type Filter struct {
	space    Space
	held     []bool
	selector string // "" when the server cannot select (by name)
	byName   bool
	inner    cache.ListerWatcherWithContext
	noStream bool          // the inner ListerWatcher cannot stream lists (fakes)
	applied  atomic.Int32  // 0 unknown, 1 applied by the server, 2 not
	shared   *atomic.Int32 // if set, kept there instead (Clientset)
}

func (f *Filter) state() *atomic.Int32 {
	if f.shared != nil {
		return f.shared
	}
	return &f.applied
}

// NewFilter returns a Filter of slots over inner. Objects are keyed as
// space says, except with byName, for the Namespaces of a space keyed
// ByNamespace: a Namespace's key is its name, which the server-side
// selector cannot hash, so only the client filters.
func NewFilter(space Space, slots []int, inner cache.ListerWatcher, byName bool) (*Filter, error) {
	if err := space.Validate(); err != nil {
		return nil, err
	}
	f := &Filter{space: space, held: make([]bool, space.Slots), byName: byName, inner: cache.ToListerWatcherWithContext(inner),
		noStream: watchlist.DoesClientNotSupportWatchListSemantics(inner)}
	for _, s := range slots {
		if s < 0 || s >= space.Slots {
			return nil, fmt.Errorf("shard: slot %d is outside 0..%d", s, space.Slots-1)
		}
		f.held[s] = true
	}
	if !byName {
		f.selector = space.Selector(slots).String()
	}
	return f, nil
}

// IsWatchListSemanticsUnSupported passes on what the inner ListerWatcher
// says, so that a reflector lists as it would over it.
func (f *Filter) IsWatchListSemanticsUnSupported() bool { return f.noStream }

// Selector is the ShardSelector the Filter sends ("" when it sends none).
func (f *Filter) Selector() string { return f.selector }

// ServerApplied reports whether the last list's ListMeta.ShardInfo echoed
// the selector (true), did not (false: the Filter alone filtered), and
// whether a list happened yet (known).
func (f *Filter) ServerApplied() (applied, known bool) { return appliedState(f.state().Load()) }

func appliedState(v int32) (applied, known bool) {
	switch v {
	case 1:
		return true, true
	case 2:
		return false, true
	}
	return false, false
}

// Contains reports whether obj is in the Filter's slots.
func (f *Filter) Contains(obj runtime.Object) bool {
	a, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	key := a.GetNamespace()
	switch {
	case f.byName:
		key = a.GetName()
	case f.space.Keying == ByUID:
		key = string(a.GetUID())
	}
	return f.held[f.space.SlotOfKey(key)]
}

func (f *Filter) options(o metav1.ListOptions) metav1.ListOptions {
	if f.selector != "" {
		o.ShardSelector = f.selector
	}
	return o
}

// ListWithContext lists through inner and drops the objects of other
// slots.
func (f *Filter) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	list, err := f.inner.ListWithContext(ctx, f.options(options))
	if err != nil {
		return nil, err
	}
	if f.selector != "" {
		if info := shardInfo(list); info != "" && sameSelector(info, f.selector) {
			f.state().Store(1)
		} else {
			f.state().Store(2)
		}
	}
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	kept := slices.DeleteFunc(items, func(o runtime.Object) bool { return !f.Contains(o) })
	if err := meta.SetList(list, kept); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	return list, nil
}

// WatchWithContext watches through inner and drops the events of other
// slots' objects.
func (f *Filter) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w, err := f.inner.WatchWithContext(ctx, f.options(options))
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		switch e.Type {
		case watch.Bookmark, watch.Error:
			return e, true
		}
		return e, f.Contains(e.Object)
	}), nil
}

// shardInfo returns the selector a list response says it applied.
func shardInfo(list runtime.Object) string {
	switch l := list.(type) {
	case metav1.ListMetaAccessor:
		if lm, ok := l.GetListMeta().(*metav1.ListMeta); ok && lm.ShardInfo != nil {
			return lm.ShardInfo.Selector
		}
	case *unstructured.UnstructuredList:
		s, _, _ := unstructured.NestedString(l.Object, "metadata", "shardInfo", "selector")
		return s
	}
	return ""
}

// sameSelector compares two selectors as the server may space them.
func sameSelector(a, b string) bool {
	return strings.Join(strings.Fields(a), "") == strings.Join(strings.Fields(b), "")
}
