package statefulset

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// recordKeys makes f's controller record the keys its handlers queue.
func recordKeys(f *fixture) *[]string {
	var keys []string
	f.c.enqueue = func(k string) { keys = append(keys, k) }
	return &keys
}

// TestPodHandlers: which pod events enqueue which sets.
func TestPodHandlers(t *testing.T) {
	set := newSet("web", 1, func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 5 })
	other := newSet("db", 1)
	owned := func(mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0",
			ResourceVersion: "1", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set,
				controllerKind)}}}
		if mod != nil {
			mod(p)
		}
		return p
	}
	orphan := func(lbls map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x-0",
			ResourceVersion: "1", Labels: lbls}}
	}
	ready := func(p *corev1.Pod) {
		p.ResourceVersion = "2"
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady,
			Status: corev1.ConditionTrue}}
	}
	tests := []struct {
		name     string
		event    func(c *controller)
		want     []string
		requeued []time.Duration
	}{
		{"add owned", func(c *controller) { c.addPod(owned(nil), false) }, []string{"ns/web"}, nil},
		{"add orphan",
			func(c *controller) { c.addPod(orphan(map[string]string{"app": "db"}), false) },
			[]string{"ns/db"}, nil},
		{"add unlabelled orphan", func(c *controller) { c.addPod(orphan(nil), false) }, nil, nil},
		{"add owned by a stranger", func(c *controller) {
			c.addPod(owned(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "other" }), false)
		}, nil, nil},
		{"update, same version", func(c *controller) { c.updatePodEvent(owned(nil), owned(nil)) },
			nil, nil},
		{"update turns ready", func(c *controller) { c.updatePodEvent(owned(nil), owned(ready)) },
			[]string{"ns/web"}, []time.Duration{5 * time.Second}},
		{"orphan relabelled", func(c *controller) {
			old := orphan(map[string]string{"app": "none"})
			cur := orphan(map[string]string{"app": "db"})
			cur.ResourceVersion = "2"
			c.updatePodEvent(old, cur)
		}, []string{"ns/db"}, nil},
		{"released", func(c *controller) {
			cur := owned(func(p *corev1.Pod) { p.OwnerReferences = nil; p.ResourceVersion = "2" })
			c.updatePodEvent(owned(nil), cur)
		}, []string{"ns/web", "ns/web"}, nil}, // the former owner, then as a matching orphan
		{"delete tombstone", func(c *controller) {
			c.deletePodEvent(cache.DeletedFinalStateUnknown{Key: "ns/web-0", Obj: owned(nil)})
		}, []string{"ns/web"}, nil},
		{"delete orphan", func(c *controller) { c.deletePodEvent(orphan(nil)) }, nil, nil},
		{"delete garbage", func(c *controller) { c.deletePodEvent("garbage") }, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, []runtime.Object{set, other})
			keys := recordKeys(f)
			tt.event(f.c)
			if got := *keys; !slices.Equal(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
			var after []time.Duration
			for _, r := range f.requeues {
				after = append(after, r.After)
			}
			if !slices.Equal(after, tt.requeued) {
				t.Errorf("requeued %v, want %v", after, tt.requeued)
			}
		})
	}
}

// TestSetHandlers: every add, update and delete of a set enqueues it.
func TestSetHandlers(t *testing.T) {
	f := newFixture(t, nil)
	keys := recordKeys(f)
	set := newSet("web", 1)
	f.c.addSet(set, false)
	f.c.updateSet(set, set)
	f.c.deleteSet(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: set})
	if got := *keys; !slices.Equal(got, []string{"ns/web", "ns/web", "ns/web"}) {
		t.Errorf("queued %v", got)
	}
}
