package endpointslice

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

func TestPodChangeEnqueuesItsServices(t *testing.T) {
	other := newService(
		"other",
		func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "other"} },
	)
	// Updates carry a new resourceVersion (same versions are resyncs).
	rv2 := func(p *corev1.Pod) { p.ResourceVersion = "2" }
	ready := newPod("a", "10.0.0.1", true, 8080, func(p *corev1.Pod) { p.ResourceVersion = "1" })
	notReady := newPod(
		"a",
		"10.0.0.1",
		false,
		8080,
		func(p *corev1.Pod) { p.ResourceVersion = "1" },
	)
	readyAgain := newPod("a", "10.0.0.1", true, 8080, rv2)
	moved := newPod("a", "10.0.0.9", true, 8080, rv2)
	relabelled := newPod(
		"a",
		"10.0.0.1",
		true,
		8080,
		rv2,
		func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} },
	)
	tests := []struct {
		name     string
		old, cur any
		want     map[string]time.Duration
	}{
		{"added", nil, ready, map[string]time.Duration{"ns/web": 3 * time.Second}},
		{
			"readiness changed",
			notReady,
			readyAgain,
			map[string]time.Duration{"ns/web": 3 * time.Second},
		},
		{"IP changed", ready, moved, map[string]time.Duration{"ns/web": 3 * time.Second}},
		{"no relevant change", ready, readyAgain, map[string]time.Duration{}},
		{
			"moved to another Service: both",
			ready,
			relabelled,
			map[string]time.Duration{"ns/web": 3 * time.Second, "ns/other": 3 * time.Second},
		},
		{"resync (same version)", ready, ready.DeepCopy(), map[string]time.Duration{}},
		{
			"deleted (tombstone)",
			cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: ready},
			nil,
			map[string]time.Duration{"ns/web": 3 * time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(
				t,
				Options{EndpointUpdatesBatchPeriod: 3 * time.Second},
				newService("web"),
				other,
			)
			f.podChanged(tt.old, tt.cur)
			if !maps.Equal(f.requeues, tt.want) {
				t.Errorf("enqueued %v, want %v", f.requeues, tt.want)
			}
		})
	}
}

func managedSlice(gen int64) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-x", UID: "uid-x", Generation: gen,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "web",
				discoveryv1.LabelManagedBy:   managedBy,
			}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
}

func TestSliceEventsEnqueueTheService(t *testing.T) {
	tests := []struct {
		name string
		do   func(c *controller)
		want map[string]time.Duration
	}{
		{
			"a slice the controller did not write",
			func(c *controller) { c.sliceAdded(managedSlice(1)) },
			map[string]time.Duration{"ns/web": time.Second},
		},
		{"the controller's own write", func(c *controller) {
			c.tracker.Update(managedSlice(1))
			c.sliceAdded(managedSlice(1))
		}, map[string]time.Duration{}},
		{"someone else's slice", func(c *controller) {
			s := managedSlice(1)
			s.Labels[discoveryv1.LabelManagedBy] = "someone"
			c.sliceAdded(s)
		}, map[string]time.Duration{}},
		{"an unexpected deletion", func(c *controller) {
			c.tracker.Update(managedSlice(1))
			c.sliceDeleted(cache.DeletedFinalStateUnknown{Obj: managedSlice(1)})
		}, map[string]time.Duration{"ns/web": time.Second}},
		{"an expected deletion", func(c *controller) {
			c.tracker.Update(managedSlice(1))
			c.tracker.ExpectDeletion(managedSlice(1))
			c.sliceDeleted(managedSlice(1))
		}, map[string]time.Duration{}},
		{"relabelled to another Service", func(c *controller) {
			moved := managedSlice(1)
			moved.Labels[discoveryv1.LabelServiceName] = "other"
			c.sliceUpdated(testLogger(nil), managedSlice(1), moved)
		}, map[string]time.Duration{"ns/web": time.Second, "ns/other": time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			tt.do(f.c)
			if !maps.Equal(f.requeues, tt.want) {
				t.Errorf("enqueued %v, want %v", f.requeues, tt.want)
			}
		})
	}
}

// TestBatchPeriodDelaysSliceResyncs: a batch period longer than the
// one-second minimum delays slice-triggered syncs too.
func TestBatchPeriodDelaysSliceResyncs(t *testing.T) {
	f := newFixture(t, Options{EndpointUpdatesBatchPeriod: 5 * time.Second})
	f.c.sliceAdded(managedSlice(1))
	if d := f.requeues["ns/web"]; d != 5*time.Second {
		t.Errorf("delay %v, want 5s", d)
	}
}

func TestTopologySyncWritesNothing(t *testing.T) {
	objs := []runtime.Object{newService("web"), newNode("node-1", "z1")}
	f := newFixture(t, Options{}, objs...)
	if err := f.sync(topologyKey); err != nil {
		t.Fatal(err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("the topology sync made %d API calls", n)
	}
}
