package shardgroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/ctrlhost/ctrlhost/shard"
)

// Filter is a cache.ListerWatcher that holds only the objects of a set of
// slots: it asks the API server for them (ListOptions.ShardSelector) and
// drops whatever else the server sends, so that it is correct on a server
// that ignores the selector (ShardedListAndWatch off, or older than
// v1.36). Bookmarks and errors pass through.
type Filter struct {
	*selection
	inner    cache.ListerWatcherWithContext
	noStream bool // the inner ListerWatcher cannot stream lists (fakes)
	own      counters
	shared   *counters // if set, kept there instead (Clientset)
}

// counters are what a Filter learnt about the server.
type counters struct {
	applied atomic.Int32 // 0 unknown, 1 applied by the server, 2 not
	dropped atomic.Int64 // objects the client had to drop
}

func (f *Filter) counts() *counters {
	if f.shared != nil {
		return f.shared
	}
	return &f.own
}

// drop records an object the server sent although it is not in the
// Filter's slots: the server did not apply the selector.
func (f *Filter) drop() {
	c := f.counts()
	c.dropped.Add(1)
	if f.selector != "" {
		c.applied.Store(2)
	}
}

// Dropped returns how many objects the Filter dropped: 0 while the server
// applies the selector (or nothing foreign came), more when it does not.
func (f *Filter) Dropped() int64 { return f.counts().dropped.Load() }

// NewFilter returns a Filter of slots over inner. Objects are keyed as
// space says, except with byName, for the Namespaces of a space keyed
// shard.ByNamespace: a Namespace's key is its name, which the server-side
// selector cannot hash, so only the client filters.
func NewFilter(
	space shard.Space,
	slots []int,
	inner cache.ListerWatcher,
	byName bool,
) (*Filter, error) {
	sel, err := newSelection(space, slots, byName)
	if err != nil {
		return nil, err
	}
	return sel.over(inner), nil
}

// selection is what a Filter keeps, checked and computed once.
type selection struct {
	space    shard.Space
	held     []bool
	selector string // "" when the server cannot select (by name)
	byName   bool
}

func newSelection(space shard.Space, slots []int, byName bool) (*selection, error) {
	if err := space.Validate(); err != nil {
		return nil, err
	}
	sel := &selection{space: space, held: make([]bool, space.Slots), byName: byName}
	for _, s := range slots {
		if s < 0 || s >= space.Slots {
			return nil, fmt.Errorf("shard: slot %d is outside 0..%d", s, space.Slots-1)
		}
		sel.held[s] = true
	}
	if !byName {
		sel.selector = space.Selector(slots).String()
	}
	return sel, nil
}

// over returns a Filter of the selection over inner.
func (sel *selection) over(inner cache.ListerWatcher) *Filter {
	return &Filter{selection: sel, inner: cache.ToListerWatcherWithContext(inner),
		noStream: watchlist.DoesClientNotSupportWatchListSemantics(inner)}
}

// IsWatchListSemanticsUnSupported passes on what the inner ListerWatcher
// says, so that a reflector lists as it would over it.
func (f *Filter) IsWatchListSemanticsUnSupported() bool { return f.noStream }

// Selector is the ShardSelector the Filter sends ("" when it sends none).
func (f *Filter) Selector() string { return f.selector }

// ServerApplied reports whether the server applied the selector: true once
// a list's ListMeta.ShardInfo echoed it, false once a list came without it
// or the Filter had to drop an object, and known false before either. An
// informer that streams its initial list (WatchListClient) never lists: on
// a server that applies the selector it stays unknown, and Dropped stays 0.
func (f *Filter) ServerApplied() (applied, known bool) {
	return appliedState(f.counts().applied.Load())
}

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
	case f.space.Keying == shard.ByUID:
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
func (f *Filter) ListWithContext(
	ctx context.Context,
	options metav1.ListOptions,
) (runtime.Object, error) {
	list, err := f.inner.ListWithContext(ctx, f.options(options))
	if err != nil {
		return nil, err
	}
	if f.selector != "" {
		if info := shardInfo(list); info != "" && sameSelector(info, f.selector) {
			f.counts().applied.Store(1)
		} else {
			f.counts().applied.Store(2)
		}
	}
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	kept := slices.DeleteFunc(items, func(o runtime.Object) bool {
		if f.Contains(o) {
			return false
		}
		f.drop()
		return true
	})
	if err := meta.SetList(list, kept); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	return list, nil
}

// WatchWithContext watches through inner and drops the events of other
// slots' objects.
func (f *Filter) WatchWithContext(
	ctx context.Context,
	options metav1.ListOptions,
) (watch.Interface, error) {
	w, err := f.inner.WatchWithContext(ctx, f.options(options))
	if err != nil {
		return nil, err
	}
	fw := &filteredWatch{in: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go fw.loop(func(e watch.Event) bool {
		switch e.Type {
		case watch.Bookmark, watch.Error:
			return true
		}
		if f.Contains(e.Object) {
			return true
		}
		f.drop()
		return false
	})
	return fw, nil
}

// filteredWatch passes on the events keep keeps. Unlike
// k8s.io/apimachinery's watch.Filter, whose goroutine stays blocked on a
// send nobody reads once the consumer stopped, Stop ends it.
type filteredWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (w *filteredWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *filteredWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

func (w *filteredWatch) loop(keep func(watch.Event) bool) {
	defer close(w.out)
	for {
		select {
		case <-w.stop:
			return
		case e, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			if !keep(e) {
				continue
			}
			select {
			case w.out <- e:
			case <-w.stop:
				return
			}
		}
	}
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
