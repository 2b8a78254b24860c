package daemonset

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// TestNodeEventsEnqueue: a node event enqueues the DaemonSet only when its
// pod there must change: the node should run one and has none, has one it
// must not keep, or has one while the status counts misscheduled pods.
// Updates that change neither labels nor taints are ignored.
func TestNodeEventsEnqueue(t *testing.T) {
	ds := newDS(
		"agent",
		func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "x"} },
	)
	h := podtemplate.Hash(&ds.Spec.Template, nil)
	misscheduled := ds.DeepCopy()
	misscheduled.Status.NumberMisscheduled = 1
	inPool := nodeLabel("pool", "x")
	tests := []struct {
		name     string
		ds       *appsv1.DaemonSet
		pods     []*corev1.Pod
		old, cur *corev1.Node // old nil: an add
		want     bool
	}{
		{"added eligible node without a pod", ds, nil, nil, newNode("a", inPool), true},
		{"added node outside the pool", ds, nil, nil, newNode("a"), false},
		{"added node during the initial list", ds, nil, nil, nil, false},
		{
			"update without label or taint change",
			ds,
			nil,
			newNode("a", inPool),
			newNode("a", inPool, func(n *corev1.Node) { n.Spec.PodCIDR = "10.0.0.0/24" }),
			false,
		},
		{"joins the pool", ds, nil, newNode("a"), newNode("a", inPool), true},
		{
			"leaves the pool with a pod",
			ds,
			[]*corev1.Pod{daemonPod("p", ds, "a", h, epoch)},
			newNode("a", inPool),
			newNode("a"),
			true,
		},
		{
			"NoSchedule taint with a pod: it stays",
			ds,
			[]*corev1.Pod{daemonPod("p", ds, "a", h, epoch)},
			newNode(
				"a",
				inPool,
			),
			newNode("a", inPool, taint("x", corev1.TaintEffectNoSchedule)),
			false,
		},
		{"NoExecute taint with a pod", ds, []*corev1.Pod{daemonPod("p", ds, "a", h, epoch)},
			newNode(
				"a",
				inPool,
			), newNode("a", inPool, taint("x", corev1.TaintEffectNoExecute)), true},
		{
			"taint removed with a pod while misscheduled",
			misscheduled,
			[]*corev1.Pod{daemonPod("p", ds, "a", h, epoch)},
			newNode(
				"a",
				inPool,
				taint("x", corev1.TaintEffectNoSchedule),
			),
			newNode("a", inPool),
			true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.ds)
			for _, p := range cached(t, tt.pods...) {
				if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
					t.Fatal(err)
				}
			}
			switch {
			case tt.cur == nil:
				f.c.addNode(newNode("a", inPool), true)
			case tt.old == nil:
				f.c.addNode(tt.cur, false)
			default:
				f.c.updateNode(tt.old, tt.cur)
			}
			if got := f.c.loop.Len() > 0; got != tt.want {
				t.Errorf("enqueued %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPodEventsObserveExpectations: a created pod observed lowers the
// expected creations; a pod seen terminating, then deleted, counts as one
// observed deletion; orphans observe nothing but wake a DaemonSet whose
// selector matches them.
func TestPodEventsObserveExpectations(t *testing.T) {
	ds := newDS("agent")
	f := newFixture(t, ds)
	key := "ns/agent"
	h := podtemplate.Hash(&ds.Spec.Template, nil)
	// As the pod informer delivers them: pruned.
	p1, p2 := daemonPod("p1", ds, "a", h, epoch), daemonPod("p2", ds, "b", h, epoch)
	p1, p2 = cached(t, p1)[0], cached(t, p2)[0]
	f.c.exp.ExpectCreations(createKey(key), 2)
	f.c.addPod(p1)
	if f.c.expectationsSatisfied(key) {
		t.Fatal("satisfied after one of two creations")
	}
	f.c.addPod(p2)
	if !f.c.expectationsSatisfied(key) {
		t.Fatal("unsatisfied after both creations")
	}
	f.c.exp.ExpectDeletions(deleteKey(key), []string{"ns/p1", "ns/p2"})
	terminating := p1.DeepCopy()
	terminating.ResourceVersion = "2"
	ts := metav1.NewTime(epoch)
	terminating.DeletionTimestamp = &ts
	f.c.updatePod(p1, terminating)
	f.c.deletePod(cache.DeletedFinalStateUnknown{Key: "ns/p1", Obj: terminating})
	if adds, dels, _ := f.c.exp.Pending(deleteKey(key)); adds != 0 || dels != 1 {
		t.Errorf("pending deletions %d after p1 went twice, want 1", dels)
	}
	f.c.deletePod(p2)
	if !f.c.expectationsSatisfied(key) {
		t.Error("unsatisfied after both deletions")
	}

	g := newFixture(t, ds)
	orphan := daemonPod("o", ds, "a", h, epoch, func(p *corev1.Pod) { p.OwnerReferences = nil })
	orphan = cached(t, orphan)[0]
	g.c.exp.ExpectCreations(createKey(key), 1)
	g.c.addPod(orphan)
	if g.c.expectationsSatisfied(key) {
		t.Error("an orphan was counted as a creation")
	}
	if g.c.loop.Len() != 1 {
		t.Error("a matching orphan did not enqueue the DaemonSet")
	}
}

// TestPodBecomingReadyRequeuesAfterMinReadySeconds: with minReadySeconds,
// a pod turning ready requeues its DaemonSet a second after it will be
// available.
func TestPodBecomingReadyRequeuesAfterMinReadySeconds(t *testing.T) {
	ds := newDS("agent", func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 5 })
	f := newFixture(t, ds)
	ready := daemonPod("p", ds, "a", podtemplate.Hash(&ds.Spec.Template, nil), epoch)
	ready.ResourceVersion = "2"
	pending := ready.DeepCopy()
	pending.ResourceVersion = "1"
	pending.Status.Conditions[0].Status = corev1.ConditionFalse
	f.c.updatePod(cached(t, pending)[0], cached(t, ready)[0])
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.requeues, []time.Duration{6 * time.Second}) {
		t.Errorf("requeues %v, want [6s]", f.requeues)
	}
}
