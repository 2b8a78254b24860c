package workloop_test

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/workloop"
)

func pod(ns, name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func ownedBy(apiVersion, kind, name string, controller bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(controller)})
	}
}

func TestKeysFuncs(t *testing.T) {
	rs := appsv1.SchemeGroupVersion.WithKind("ReplicaSet").GroupKind()
	for _, tc := range []struct {
		name string
		keys workloop.KeysFunc[string]
		obj  metav1.Object
		want []string
	}{
		{"own key", workloop.EnqueueKey(), pod("ns", "p"), []string{"ns/p"}},
		{"cluster-scoped key", workloop.EnqueueKey(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, []string{"n"}},
		{"controller owner of the kind", workloop.EnqueueOwner(rs), pod("ns", "p", ownedBy("apps/v1", "ReplicaSet", "rs", true)), []string{"ns/rs"}},
		{"owner, not controller", workloop.EnqueueOwner(rs), pod("ns", "p", ownedBy("apps/v1", "ReplicaSet", "rs", false)), nil},
		{"controller of another kind", workloop.EnqueueOwner(rs), pod("ns", "p", ownedBy("apps/v1", "StatefulSet", "ss", true)), nil},
		{"controller of another group", workloop.EnqueueOwner(rs), pod("ns", "p", ownedBy("example.com/v1", "ReplicaSet", "rs", true)), nil},
		{"no owner", workloop.EnqueueOwner(rs), pod("ns", "p"), nil},
		{"mapped", workloop.EnqueueMapped(func(o metav1.Object) []string { return []string{o.GetLabels()["to"] + "/" + o.GetName()} }),
			pod("ns", "p", func(p *corev1.Pod) { p.Labels = map[string]string{"to": "other"} }), []string{"other/p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.keys(tc.obj); !slices.Equal(got, tc.want) {
				t.Errorf("keys = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	gen := func(g int64, rv string) *corev1.Pod {
		return pod("a", "p", func(p *corev1.Pod) { p.Generation, p.ResourceVersion = g, rv; p.Labels = map[string]string{"app": "x"} })
	}
	other := pod("a", "p", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "y"} })
	sel := labels.SelectorFromSet(labels.Set{"app": "x"})
	for _, tc := range []struct {
		name   string
		filter workloop.Filter
		event  workloop.Event
		want   bool
	}{
		{"namespace in", workloop.InNamespace("a", "b"), workloop.Event{Type: workloop.Added, Object: pod("b", "p")}, true},
		{"namespace out", workloop.InNamespace("a"), workloop.Event{Type: workloop.Added, Object: pod("c", "p")}, false},
		{"labels match", workloop.WithLabels(sel), workloop.Event{Type: workloop.Added, Object: gen(1, "1")}, true},
		{"labels do not match", workloop.WithLabels(sel), workloop.Event{Type: workloop.Added, Object: other}, false},
		{"labels: leaving the selection", workloop.WithLabels(sel), workloop.Event{Type: workloop.Updated, Old: gen(1, "1"), Object: other}, true},
		{"generation same", workloop.GenerationChanged(), workloop.Event{Type: workloop.Updated, Old: gen(1, "1"), Object: gen(1, "2")}, false},
		{"generation changed", workloop.GenerationChanged(), workloop.Event{Type: workloop.Updated, Old: gen(1, "1"), Object: gen(2, "2")}, true},
		{"generation: adds pass", workloop.GenerationChanged(), workloop.Event{Type: workloop.Added, Object: gen(1, "1")}, true},
		{"generation: deletes pass", workloop.GenerationChanged(), workloop.Event{Type: workloop.Deleted, Object: gen(1, "1")}, true},
		{"resync dropped", workloop.ResourceVersionChanged(), workloop.Event{Type: workloop.Updated, Old: gen(1, "1"), Object: gen(1, "1")}, false},
		{"real update passes", workloop.ResourceVersionChanged(), workloop.Event{Type: workloop.Updated, Old: gen(1, "1"), Object: gen(1, "2")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.filter(tc.event); got != tc.want {
				t.Errorf("filter = %v, want %v", got, tc.want)
			}
		})
	}
}

// Watch turns informer events into keys, applies the filters, and makes Run
// wait for its handler.
func TestWatchOverAnInformer(t *testing.T) {
	cs := fake.NewClientset(pod("kept", "a"), pod("filtered", "b"))
	factory := informers.NewSharedInformerFactory(cs, 0)
	pods := factory.Core().V1().Pods().Informer()
	synced := make(chan string, 10)
	l := workloop.New("watcher", func(_ context.Context, key string) error { synced <- key; return nil }, workloop.Options{})
	if err := l.Watch(pods, workloop.EnqueueKey(), workloop.InNamespace("kept")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	stop := run(t, l)
	if got := recv(t, synced); got != "kept/a" {
		t.Errorf("first key %q, want kept/a", got)
	}
	if err := cs.CoreV1().Pods("kept").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, synced); got != "kept/a" {
		t.Errorf("key after delete %q, want kept/a", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-synced:
		t.Errorf("unexpected key %q (the filter should drop other namespaces)", k)
	default:
	}
}

// stubInformer hands the test the handler Watch registers.
type stubInformer struct {
	cache.SharedInformer
	handler cache.ResourceEventHandler
}

func (s *stubInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	s.handler = h
	return syncedRegistration{}, nil
}

type syncedRegistration struct {
	cache.ResourceEventHandlerRegistration
}

func (syncedRegistration) HasSynced() bool { return true }

// A delete the informer only learned of as a tombstone still maps to the
// object's key.
func TestWatchUnwrapsTombstones(t *testing.T) {
	inf := &stubInformer{}
	l := workloop.New("tombstones", func(context.Context, string) error { return nil }, workloop.Options{})
	defer l.ShutDown()
	if err := l.Watch(inf, workloop.EnqueueKey()); err != nil {
		t.Fatal(err)
	}
	inf.handler.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: pod("ns", "gone")})
	inf.handler.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/odd", Obj: "not an object"})
	if l.Len() != 1 {
		t.Fatalf("%d keys queued, want 1", l.Len())
	}
}

func recv(t *testing.T, c <-chan string) string {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(deadline):
		t.Fatal("no key synced")
		return ""
	}
}

func TestWatchNeedsInformerAndKeys(t *testing.T) {
	l := workloop.New("bad-watch", func(context.Context, string) error { return nil }, workloop.Options{})
	defer l.ShutDown()
	if err := l.Watch(nil, workloop.EnqueueKey()); err == nil {
		t.Error("Watch(nil informer) succeeded")
	}
}
