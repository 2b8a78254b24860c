package controllertest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/descriptor"
	ctrlinformers "github.com/ctrlhost/ctrlhost/informers"
)

// LogContext returns t's context carrying a logger that writes to t.Log.
func LogContext(t *testing.T) context.Context {
	return logr.NewContext(t.Context(), testr.New(t))
}

// NamespacedIndexer returns an indexer as a shared informer of a namespaced
// resource has one (keys namespace/name, the namespace index), holding objs.
// A lister over it stands in for the informer's.
func NamespacedIndexer[T any](t testing.TB, objs ...T) cache.Indexer {
	t.Helper()
	return fill(
		t,
		cache.NewIndexer(
			cache.MetaNamespaceKeyFunc,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		),
		objs,
	)
}

// ClusterIndexer is NamespacedIndexer for a cluster-scoped resource: no
// namespace index.
func ClusterIndexer[T any](t testing.TB, objs ...T) cache.Indexer {
	t.Helper()
	return fill(t, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), objs)
}

func fill[T any](t testing.TB, idx cache.Indexer, objs []T) cache.Indexer {
	t.Helper()
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// OfType returns those of objs that are T's, in order.
func OfType[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// DeepCopies returns deep copies of objs, for a fake clientset that must not
// share objects with the listers.
func DeepCopies[T runtime.Object](objs ...T) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		out = append(out, o.DeepCopyObject())
	}
	return out
}

// CountActions counts client's recorded actions with the verb, on resource
// unless resource is empty.
func CountActions(client *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && (resource == "" || a.GetResource().Resource == resource) {
			n++
		}
	}
	return n
}

// Actions lists client's recorded actions, in order, as "verb resource"
// or "verb resource/subresource", leaving out those whose verb is one of
// omit (for example "list" and "watch", an informer's).
func Actions(client *fake.Clientset, omit ...string) []string {
	var out []string
	for _, a := range client.Actions() {
		if slices.Contains(omit, a.GetVerb()) {
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

// Epoch is the fixtures' fixed "now": 2026-03-01 12:00:00 UTC. Read it,
// never assign it: it is shared by every test of a package.
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Events drains r's channel: the events recorded since the last drain, in
// order, as record.FakeRecorder writes them ("<type> <reason> <message>").
// It does not wait for an event.
func Events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// HasEvent reports whether one of events (as Events returns them) starts
// with prefix.
func HasEvent(events []string, prefix string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, prefix) })
}

// Requeue is one delayed enqueue.
type Requeue struct {
	Key   string
	After time.Duration
}

// Requeues records delayed enqueues in order. A fixture puts its AddAfter
// where the controller would call workloop.Loop.AddAfter.
type Requeues []Requeue

// AddAfter records that key was to be enqueued after d.
func (r *Requeues) AddAfter(key string, d time.Duration) { *r = append(*r, Requeue{key, d}) }

// Mirror replaces store's contents with the objects of resource that
// client's fake API server holds, as a watch would bring them, without
// calling any handler: for tests that sync directly over informers they
// never start.
func Mirror(
	t testing.TB,
	client *fake.Clientset,
	store cache.Store,
	resource schema.GroupVersionResource,
) {
	t.Helper()
	kind, ok := kindOf(resource)
	if !ok {
		t.Fatalf("controllertest.Mirror: no kind for %v in client-go's scheme", resource)
	}
	list, err := client.Tracker().List(resource, kind, "")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 0, len(objs))
	for _, o := range objs {
		items = append(items, o)
	}
	if err := store.Replace(items, ""); err != nil {
		t.Fatal(err)
	}
}

// kindOf finds the kind whose conventional resource name is resource.
func kindOf(resource schema.GroupVersionResource) (schema.GroupVersionKind, bool) {
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.GroupVersion() != resource.GroupVersion() || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if plural, _ := meta.UnsafeGuessKindToResource(gvk); plural == resource {
			return gvk, true
		}
	}
	return schema.GroupVersionKind{}, false
}

// Cache puts o into the store of factory's informer for o's resource, as a
// watch event would, without calling any handler.
func Cache(t testing.TB, factory informers.SharedInformerFactory, o runtime.Object) {
	t.Helper()
	kinds, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil || len(kinds) == 0 {
		t.Fatalf("controllertest.Cache: %T is not in client-go's scheme: %v", o, err)
	}
	resource, _ := meta.UnsafeGuessKindToResource(kinds[0])
	inf, err := factory.ForResource(resource)
	if err != nil {
		t.Fatalf("controllertest.Cache: %v", err)
	}
	if err := inf.Informer().GetIndexer().Add(o); err != nil {
		t.Fatal(err)
	}
}

// Pruned returns copies of objs with only the fields d declares it reads
// (descriptor.WithReads), as a host's informers would cache them: a
// controller that reads a field it did not declare finds its zero value
// in its tests, not first in production.
func Pruned[T runtime.Object](t testing.TB, d descriptor.Descriptor, objs ...T) []T {
	t.Helper()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		c := o.DeepCopyObject().(T)
		if err := ctrlinformers.Fields(d.Reads()).Prune(c); err != nil {
			t.Fatalf("controllertest.Pruned: %s: %v", d.Name(), err)
		}
		out = append(out, c)
	}
	return out
}

// CacheAs is Cache of o as d's informers would hold it (Pruned).
func CacheAs(t testing.TB, d descriptor.Descriptor, factory informers.SharedInformerFactory,
	o runtime.Object) {
	t.Helper()
	Cache(t, factory, Pruned(t, d, o)[0])
}

// PrunedEvent is o, an event handler's argument (an object, a tombstone of
// one, or nil), as d's informers would hand it over: Pruned.
func PrunedEvent(t testing.TB, d descriptor.Descriptor, o any) any {
	t.Helper()
	switch o := o.(type) {
	case runtime.Object:
		return Pruned(t, d, o)[0]
	case cache.DeletedFinalStateUnknown:
		if obj, ok := o.Obj.(runtime.Object); ok {
			o.Obj = Pruned(t, d, obj)[0]
		}
		return o
	}
	return o
}
