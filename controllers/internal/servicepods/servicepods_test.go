package servicepods

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func service(name string, sel map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.ServiceSpec{Selector: sel},
	}
}

func pod(rv string, labels map[string]string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns",
			Name:            "p",
			ResourceVersion: rv,
			Labels:          labels,
		},
		Status: corev1.PodStatus{PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func TestPodChangesReachTheirServices(t *testing.T) {
	web, other := map[string]string{"app": "web"}, map[string]string{"app": "other"}
	tests := []struct {
		name     string
		old, obj any
		want     map[string]time.Duration
	}{
		{"added", nil, pod("1", web, true), map[string]time.Duration{"ns/web": 2 * time.Second}},
		{"deleted", pod("1", web, true), nil, map[string]time.Duration{"ns/web": 2 * time.Second}},
		{
			"tombstone",
			cache.DeletedFinalStateUnknown{Obj: pod("1", web, true)},
			nil,
			map[string]time.Duration{"ns/web": 2 * time.Second},
		},
		{
			"readiness changed",
			pod("1", web, false),
			pod("2", web, true),
			map[string]time.Duration{"ns/web": 2 * time.Second},
		},
		{"relabelled: old and new Services", pod("1", web, true), pod("2", other, true),
			map[string]time.Duration{"ns/web": 2 * time.Second, "ns/other": 2 * time.Second}},
		{"nothing relevant", pod("1", web, true), pod("2", web, true), map[string]time.Duration{}},
		{"resync", pod("1", web, true), pod("1", web, true), map[string]time.Duration{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			services := corelisters.NewServiceLister(
				controllertest.NamespacedIndexer(t, service("web", web), service("other", other)),
			)
			got := map[string]time.Duration{}
			q := New(services, func(key string, d time.Duration) { got[key] = d }, 2*time.Second)
			defer q.ShutDown()
			q.PodChanged(tt.old, tt.obj)
			for q.Len() > 0 {
				q.ProcessNext(logr.Discard())
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("enqueued %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRunStopsWithContext: Run processes changes and returns, its workers
// gone, when ctx ends.
func TestRunStopsWithContext(t *testing.T) {
	services := corelisters.NewServiceLister(
		controllertest.NamespacedIndexer(t, service("web", map[string]string{"app": "web"})),
	)
	got := make(chan string, 1)
	q := New(services, func(key string, _ time.Duration) { got <- key }, 0)
	q.PodChanged(nil, pod("1", map[string]string{"app": "web"}, true))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx, 2)
	}()
	select {
	case k := <-got:
		if k != "ns/web" {
			t.Errorf("enqueued %q", k)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pod change was not processed")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
}
