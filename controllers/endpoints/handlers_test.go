package endpoints

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/servicepods"
)

func TestPodChangeEnqueuesItsServices(t *testing.T) {
	rv := func(v string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.ResourceVersion = v } }
	ready := newPod("a", "10.0.0.1", true, 8080, rv("1"))
	notReady := newPod("a", "10.0.0.1", false, 8080, rv("1"))
	readyAgain := newPod("a", "10.0.0.1", true, 8080, rv("2"))
	moved := newPod("a", "10.0.0.9", true, 8080, rv("2"))
	tests := []struct {
		name     string
		old, cur any
		want     map[string]time.Duration
	}{
		{"added", nil, ready, map[string]time.Duration{"ns/web": 0}},
		{"readiness changed", notReady, readyAgain, map[string]time.Duration{"ns/web": 0}},
		{"IP changed", ready, moved, map[string]time.Duration{"ns/web": 0}},
		{"nothing relevant changed", ready, readyAgain, map[string]time.Duration{}},
		{"resync", ready, ready.DeepCopy(), map[string]time.Duration{}},
		{
			"deleted (tombstone)",
			cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: ready},
			nil,
			map[string]time.Duration{"ns/web": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(
				t,
				newService("web"),
				newService(
					"other",
					func(s *corev1.Service) { s.Spec.Selector = map[string]string{"x": "y"} },
				),
			)
			f.podChanged(tt.old, tt.cur)
			if !maps.Equal(f.requeues, tt.want) {
				t.Errorf("enqueued %v, want %v", f.requeues, tt.want)
			}
		})
	}
}

// TestBatchPeriodDelaysPodTriggeredSyncs: pod changes wait for the batch
// period; Service and Endpoints events do not.
func TestBatchPeriodDelaysPodTriggeredSyncs(t *testing.T) {
	f := newFixture(t, newService("web"))
	f.c.podQueue.ShutDown()
	f.c.podQueue = servicepods.New(
		corelisters.NewServiceLister(f.services),
		func(key string, d time.Duration) { f.c.after(key, d) },
		4*time.Second,
	)
	f.podChanged(nil, newPod("a", "10.0.0.1", true, 8080))
	if d := f.requeues["ns/web"]; d != 4*time.Second {
		t.Errorf("pod-triggered delay %v, want 4s", d)
	}
	f.c.enqueue(cache.DeletedFinalStateUnknown{Key: "ns/other"})
	if d, ok := f.requeues["ns/other"]; !ok || d != 0 {
		t.Errorf("Endpoints deletion enqueued %v (%v), want at once", d, ok)
	}
}
