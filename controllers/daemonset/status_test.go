package daemonset

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// TestStatusCounts: the status fields for a mix of nodes and pods, with
// minReadySeconds 60 at epoch.
func TestStatusCounts(t *testing.T) {
	ds := newDS("agent", func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 60 })
	h := podtemplate.Hash(&ds.Spec.Template, nil)
	long := epoch.Add(-time.Hour)
	notReady := func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
	oldHash := func(p *corev1.Pod) { p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = "old" }
	oldGen := func(p *corev1.Pod) { oldHash(p); p.Labels["pod-template-generation"] = "1" }
	tests := []struct {
		name  string
		nodes []runtime.Object
		pods  []runtime.Object
		want  counts
	}{
		{"no nodes", nil, nil, counts{}},
		{"eligible node without a pod", nodes("a"), nil, counts{desired: 1, unavailable: 1}},
		{"available updated pod", nodes("a"), []runtime.Object{daemonPod("p", ds, "a", h, long)},
			counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1}},
		{
			"ready for less than minReadySeconds",
			nodes("a"),
			[]runtime.Object{daemonPod("p", ds, "a", h, epoch.Add(-30*time.Second))},
			counts{desired: 1, current: 1, ready: 1, updated: 1, unavailable: 1},
		},
		{
			"ready exactly minReadySeconds",
			nodes("a"),
			[]runtime.Object{daemonPod("p", ds, "a", h, epoch.Add(-60*time.Second))},
			counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1},
		},
		{"not ready", nodes("a"), []runtime.Object{daemonPod("p", ds, "a", h, long, notReady)},
			counts{desired: 1, current: 1, updated: 1, unavailable: 1}},
		{"old revision", nodes("a"), []runtime.Object{daemonPod("p", ds, "a", h, long, oldHash)},
			counts{desired: 1, current: 1, ready: 1, available: 1}},
		{
			"old hash but current template generation counts as updated",
			nodes("a"),
			[]runtime.Object{daemonPod("p", ds, "a", h, long, oldGen)},
			counts{desired: 1, current: 1, ready: 1, available: 1, updated: 1},
		},
		{"the oldest pod of a node decides", nodes("a"), []runtime.Object{
			daemonPod(
				"p1",
				ds,
				"a",
				h,
				long,
				oldHash,
				notReady,
			), daemonPod("p2", ds, "a", h, epoch.Add(-time.Minute*30))},
			counts{desired: 1, current: 1, unavailable: 1}},
		{
			"pod on an ineligible node is misscheduled",
			[]runtime.Object{newNode("a", taint("x", corev1.TaintEffectNoSchedule))},
			[]runtime.Object{daemonPod("p", ds, "a", h, long)},
			counts{misscheduled: 1},
		},
		{
			"mixed",
			nodes("a", "b", "c"),
			[]runtime.Object{
				daemonPod("pa", ds, "a", h, long),
				daemonPod("pb", ds, "b", h, long, oldHash, notReady),
			},
			counts{desired: 3, current: 2, ready: 1, available: 1, updated: 1, unavailable: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, append(objs(ds, tt.nodes...), tt.pods...)...)
			var ns []*corev1.Node
			for _, o := range tt.nodes {
				ns = append(ns, o.(*corev1.Node))
			}
			byNode, err := f.c.podsByNode(t.Context(), ds, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := calculateCounts(ds, ns, byNode, h, newEligibility(ds, false), f.clock.Now()); got != tt.want {
				t.Errorf("counts %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestStatusWrite: a sync writes the counts and observedGeneration; with
// creations still expected it writes the counts but leaves
// observedGeneration; a ready but not yet available pod requeues the
// DaemonSet after minReadySeconds; unchanged counts write nothing.
func TestStatusWrite(t *testing.T) {
	ds := newDS(
		"agent",
		func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 10; ds.Generation = 3 },
	)
	f := newFixture(t, objs(ds, nodes("a", "b")...)...)
	f.c.exp.ExpectCreations(createKey("ns/agent"), 1)
	f.mustSync("agent")
	if st := f.ds("agent").Status; st.DesiredNumberScheduled != 2 || st.ObservedGeneration != 0 {
		t.Errorf("with unmet expectations: %+v, want desired 2 and observedGeneration 0", st)
	}
	if n := f.countActions("create", "pods"); n != 0 {
		t.Errorf("%d creates with unmet expectations", n)
	}
	f.c.forgetExpectations("ns/agent")
	f.mustSync("agent")
	if st := f.ds("agent").Status; st.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d, want 3", st.ObservedGeneration)
	}
	f.kubelet()
	f.c.forgetExpectations("ns/agent")
	f.mu.Lock()
	f.requeues = nil
	f.mu.Unlock()
	f.mustSync("agent")
	st := f.ds("agent").Status
	if st.NumberReady != 2 || st.NumberAvailable != 0 || st.NumberUnavailable != 2 ||
		st.UpdatedNumberScheduled != 2 ||
		st.CurrentNumberScheduled != 2 {
		t.Errorf("status with pods ready for 0s of 10: %+v", st)
	}
	f.mu.Lock()
	requeued := slices.Contains(f.requeues, 10*time.Second)
	f.mu.Unlock()
	if !requeued {
		t.Error("not requeued after minReadySeconds")
	}
	f.clock.Step(10 * time.Second)
	f.mustSync("agent")
	if st := f.ds("agent").Status; st.NumberAvailable != 2 || st.NumberUnavailable != 0 {
		t.Errorf("status after minReadySeconds: %+v", st)
	}
	writes := func() int {
		n := 0
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	before := writes()
	f.mustSync("agent")
	if writes() != before {
		t.Error("an unchanged status was written again")
	}
}

// TestDaemonSetBeingDeleted: a DaemonSet with a deletionTimestamp is left
// alone: no revision, no pods, no status.
func TestDaemonSetBeingDeleted(t *testing.T) {
	ds := newDS("agent", func(ds *appsv1.DaemonSet) {
		ts := metav1.NewTime(epoch)
		ds.DeletionTimestamp = &ts
		ds.Finalizers = []string{"example.com/hold"}
	})
	f := newFixture(t, objs(ds, nodes("a")...)...)
	f.mustSync("agent")
	for _, a := range f.client.Actions() {
		if v := a.GetVerb(); v != "list" && v != "watch" {
			t.Errorf("unexpected %s %s", v, a.GetResource().Resource)
		}
	}
}
