package workloop

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func owned(apiVersion, kind string, controller bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
			Name:      "p",
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: apiVersion, Kind: kind, Name: "owner", Controller: &controller}},
		},
	}
}

func TestMappers(t *testing.T) {
	rs := appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	tests := []struct {
		name string
		m    Mapper
		obj  any
		want []string
	}{
		{
			"key",
			EnqueueKey(),
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}},
			[]string{"ns/p"},
		},
		{
			"cluster-scoped key",
			EnqueueKey(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
			[]string{"ns"},
		},
		{"not an object", EnqueueKey(), 42, nil},
		{
			"controller owner",
			EnqueueOwner(rs),
			owned("apps/v1", "ReplicaSet", true),
			[]string{"ns/owner"},
		},
		{
			"owner of another version",
			EnqueueOwner(rs),
			owned("apps/v1beta2", "ReplicaSet", true),
			[]string{"ns/owner"},
		},
		{"owner of another kind", EnqueueOwner(rs), owned("apps/v1", "StatefulSet", true), nil},
		{
			"owner of another group",
			EnqueueOwner(rs),
			owned("example.com/v1", "ReplicaSet", true),
			nil,
		},
		{
			"owner that is not the controller",
			EnqueueOwner(rs),
			owned("apps/v1", "ReplicaSet", false),
			nil,
		},
		{
			"mapped",
			EnqueueMapped(func(any) []string { return []string{"a", "b"} }),
			&corev1.Pod{},
			[]string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m(tt.obj); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func podAt(ns string, lbls map[string]string, gen int64, rv string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ns,
			Name:            "p",
			Labels:          lbls,
			Generation:      gen,
			ResourceVersion: rv,
		},
	}
}

func TestFilters(t *testing.T) {
	app := map[string]string{"app": "web"}
	sel := labels.SelectorFromSet(app)
	tests := []struct {
		name     string
		f        Filter
		old, obj any
		want     bool
	}{
		{"namespace match", InNamespace("a", "b"), nil, podAt("b", nil, 1, "1"), true},
		{"namespace miss", InNamespace("a"), nil, podAt("b", nil, 1, "1"), false},
		{"labels match", MatchingLabels(sel), nil, podAt("a", app, 1, "1"), true},
		{"labels miss", MatchingLabels(sel), nil, podAt("a", nil, 1, "1"), false},
		{
			"labels removed by update",
			MatchingLabels(sel),
			podAt("a", app, 1, "1"),
			podAt("a", nil, 1, "2"),
			true,
		},
		{"generation add", GenerationChanged(), nil, podAt("a", nil, 1, "1"), true},
		{
			"generation same",
			GenerationChanged(),
			podAt("a", nil, 1, "1"),
			podAt("a", app, 1, "2"),
			false,
		},
		{
			"generation bumped",
			GenerationChanged(),
			podAt("a", nil, 1, "1"),
			podAt("a", nil, 2, "2"),
			true,
		},
		{
			"resync",
			ResourceVersionChanged(),
			podAt("a", nil, 1, "7"),
			podAt("a", nil, 1, "7"),
			false,
		},
		{
			"real update",
			ResourceVersionChanged(),
			podAt("a", nil, 1, "7"),
			podAt("a", nil, 1, "8"),
			true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f(tt.old, tt.obj); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWatchEnqueues drives the handler Watch registers: an update enqueues
// the old and the new key, a tombstone is unwrapped, filters apply.
func TestWatchEnqueues(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	inf := factory.Core().V1().Pods().Informer()
	l := New("watch-test", func(context.Context, string) error { return nil }, Options{})
	defer l.ShutDown()
	var h cache.ResourceEventHandler
	capture := &capturingInformer{SharedIndexInformer: inf, got: &h}
	if err := l.Watch(capture, EnqueueMapped(func(obj any) []string {
		return []string{obj.(*corev1.Pod).Labels["to"]}
	}), InNamespace("a")); err != nil {
		t.Fatal(err)
	}
	pod := func(ns, to string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns,
				Name:      "p",
				Labels:    map[string]string{"to": to},
			},
		}
	}
	h.OnAdd(pod("b", "filtered-out"), false)
	h.OnUpdate(pod("a", "old"), pod("a", "new"))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "a/p", Obj: pod("a", "tombstone")})
	var keys []string
	for l.Len() > 0 {
		k, _ := l.queue.Get()
		keys = append(keys, k)
		l.queue.Done(k)
	}
	slices.Sort(keys)
	if want := []string{"new", "old", "tombstone"}; !slices.Equal(keys, want) {
		t.Errorf("enqueued %v, want %v", keys, want)
	}
}

// capturingInformer hands the registered handler to the test instead of
// running an informer.
type capturingInformer struct {
	cache.SharedIndexInformer
	got *cache.ResourceEventHandler
}

func (c *capturingInformer) AddEventHandler(
	h cache.ResourceEventHandler,
) (cache.ResourceEventHandlerRegistration, error) {
	*c.got = h
	return c.SharedIndexInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{})
}

func TestObject(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, tc := range []struct {
		name string
		obj  any
		ok   bool
	}{
		{"the object", p, true},
		{"a tombstone's last state", cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: p}, true},
		{"another type", &corev1.Node{}, false},
		{"a tombstone of another type", cache.DeletedFinalStateUnknown{Key: "n", Obj: &corev1.Node{}}, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Object[*corev1.Pod](tc.obj)
			if ok != tc.ok || ok && got != p {
				t.Errorf("Object = %v, %v; want the pod: %v", got, ok, tc.ok)
			}
		})
	}
}

// TestWatchRejectsNilFuncs: a nil Mapper or Filter is an error naming it,
// not a panic in the informer's goroutine at the first event.
func TestWatchRejectsNilFuncs(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	inf := factory.Core().V1().Pods().Informer()
	l := New("watch-test", func(context.Context, string) error { return nil }, Options{})
	defer l.ShutDown()
	if err := l.Watch(inf, nil); err == nil || !strings.Contains(err.Error(), "the Mapper is nil") {
		t.Errorf("Watch with a nil Mapper = %v", err)
	}
	err := l.Watch(inf, EnqueueKey(), InNamespace("a"), nil)
	if err == nil || !strings.Contains(err.Error(), "filter 1 is nil") {
		t.Errorf("Watch with a nil filter = %v", err)
	}
}
