package daemonset

import (
	"errors"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

func objs(ds *appsv1.DaemonSet, rest ...runtime.Object) []runtime.Object {
	return append([]runtime.Object{ds}, rest...)
}

// daemonPod is a running, ready pod of ds on node, created at created and
// labelled with hash.
func daemonPod(
	name string,
	ds *appsv1.DaemonSet,
	node, hash string,
	created time.Time,
	mods ...func(*corev1.Pod),
) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{
				"app":                                 "agent",
				appsv1.DefaultDaemonSetUniqueLabelKey: hash,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Spec: corev1.PodSpec{NodeName: node, Affinity: targetAffinity(nil, node)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{
				Type:               corev1.PodReady,
				Status:             corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(created),
			},
		}},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// TestCreatesOnePodPerEligibleNode: the first sync makes the revision and
// one pod per eligible node, each pinned to its node, carrying the
// revision hash, the template generation and the default tolerations.
func TestCreatesOnePodPerEligibleNode(t *testing.T) {
	ds := newDS("agent")
	f := newFixture(t, objs(
		ds,
		newNode("a"),
		newNode("b", taint("example.com/dedicated", corev1.TaintEffectNoSchedule)),
		newNode(
			"c",
			func(n *corev1.Node) { n.Spec.Unschedulable = true },
			taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
		),
	)...)
	f.mustSync("agent")
	if got := f.podNodes(false); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("pods on %v, want [a c]", got)
	}
	hash := podtemplate.Hash(&ds.Spec.Template, nil)
	for _, p := range f.apiPods() {
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != hash ||
			p.Labels["pod-template-generation"] != "1" ||
			p.Labels["app"] != "agent" {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
		if !equality.Semantic.DeepEqual(p.Spec.Tolerations, defaultTolerations) {
			t.Errorf("pod %s tolerations %v", p.Name, p.Spec.Tolerations)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != ds.UID ||
			ref.Kind != "DaemonSet" {
			t.Errorf("pod %s controller %v", p.Name, ref)
		}
		if p.GenerateName != "agent-" {
			t.Errorf("pod %s generateName %q", p.Name, p.GenerateName)
		}
	}
	if ev := f.events(); len(ev) != 2 || !controllertest.HasEvent(ev, "Normal SuccessfulCreate") {
		t.Errorf("events %v, want two SuccessfulCreate", ev)
	}
	st := f.ds("agent").Status
	if st.DesiredNumberScheduled != 2 || st.CurrentNumberScheduled != 0 ||
		st.ObservedGeneration != 1 {
		t.Errorf("status after creating (pods not yet in the cache) %+v", st)
	}
	// The caches have not seen the pods: expectations hold the next sync
	// back from creating again.
	if err := f.c.sync(t.Context(), "ns/agent"); err != nil {
		t.Fatal(err)
	}
	if n := f.countActions("create", "pods"); n != 2 {
		t.Errorf("%d creates after a second sync on stale caches, want 2", n)
	}
}

// TestSlowStart: creates go in batches of 1, 2, 4, …; the first batch with
// a failure ends the sync, and what was never attempted is not expected.
func TestSlowStart(t *testing.T) {
	tests := []struct {
		name        string
		failFrom    int // the n-th create (1-based) and later ones fail; 0: none
		wantCalls   int
		wantCreated int
	}{
		{"no failure", 0, 10, 10},
		{"first fails", 1, 1, 0},
		{"second fails", 2, 3, 1},
		{"fourth fails", 4, 7, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(
				t,
				objs(
					newDS("agent"),
					nodes("n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9")...)...)
			calls := 0
			f.client.PrependReactor(
				"create",
				"pods",
				func(clienttesting.Action) (bool, runtime.Object, error) {
					calls++ // batches run concurrently, but the fake client serialises reactors
					if tt.failFrom > 0 && calls >= tt.failFrom {
						return true, nil, errors.New("quota exceeded")
					}
					return false, nil, nil
				},
			)
			err := f.sync("agent")
			if (err != nil) != (tt.failFrom > 0) {
				t.Fatalf("sync error %v", err)
			}
			if calls != tt.wantCalls || len(f.apiPods()) != tt.wantCreated {
				t.Errorf(
					"%d create calls, %d pods; want %d, %d",
					calls,
					len(f.apiPods()),
					tt.wantCalls,
					tt.wantCreated,
				)
			}
			// Once the created pods are observed, the DaemonSet may act again.
			for range tt.wantCreated {
				f.c.exp.CreationObserved(createKey("ns/agent"))
			}
			if !f.c.expectationsSatisfied("ns/agent") {
				t.Error("expectations unmet after every created pod was observed")
			}
		})
	}
}

// TestDeletesPodsThatShouldNotRun: pods on a node with an untolerated
// NoExecute taint, all but the oldest pod on a node, unbound pods of
// vanished nodes, and succeeded pods go; a pod on a node with an
// untolerated NoSchedule taint stays (and counts as misscheduled); pods
// being deleted are left alone and not replaced yet.
func TestDeletesPodsThatShouldNotRun(t *testing.T) {
	ds := newDS("agent")
	h := podtemplate.Hash(&ds.Spec.Template, nil)
	t0 := epoch.Add(-time.Hour)
	deleting := func(p *corev1.Pod) {
		ts := metav1.NewTime(epoch)
		p.DeletionTimestamp = &ts
		p.Finalizers = []string{"example.com/hold"}
	}
	unbound := func(p *corev1.Pod) { p.Spec.NodeName = "" }
	succeeded := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	f := newFixture(t, objs(ds,
		newNode("evict", taint("example.com/evict", corev1.TaintEffectNoExecute)),
		newNode("noschedule", taint("example.com/dedicated", corev1.TaintEffectNoSchedule)),
		newNode("double"), newNode("terminating"), newNode("done"),
		daemonPod("p-evict", ds, "evict", h, t0),
		daemonPod("p-noschedule", ds, "noschedule", h, t0),
		daemonPod("p-old", ds, "double", h, t0),
		daemonPod("p-new", ds, "double", h, t0.Add(time.Minute)),
		daemonPod("p-terminating", ds, "terminating", h, t0, deleting),
		daemonPod("p-gone-node", ds, "vanished", h, t0, unbound),
		daemonPod("p-done", ds, "done", h, t0, succeeded),
	)...)
	f.mustSync("agent")
	var deleted []string
	for _, a := range f.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok && d.GetResource().Resource == "pods" {
			deleted = append(deleted, d.GetName())
		}
	}
	slices.Sort(deleted)
	if want := []string{"p-done", "p-evict", "p-gone-node", "p-new"}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	if n := f.countActions("create", "pods"); n != 0 {
		t.Errorf(
			"%d creates, want none (the terminating pod holds its node; the others are handled next sync)",
			n,
		)
	}
	ev := f.events()
	if !controllertest.HasEvent(ev, "Normal SucceededDaemonPod") ||
		!controllertest.HasEvent(ev, "Normal SuccessfulDelete") {
		t.Errorf("events %v", ev)
	}
	st := f.ds("agent").Status
	// Desired: double, terminating, done. Scheduled there: all three (the
	// succeeded pod still counts until it is gone). Misscheduled: evict,
	// noschedule.
	if st.DesiredNumberScheduled != 3 || st.CurrentNumberScheduled != 3 ||
		st.NumberMisscheduled != 2 {
		t.Errorf("status %+v", st)
	}
}

// TestFailedPodBackoff: a failed daemon pod is deleted at once with a
// FailedDaemonPod event; failures on the same node within the back-off
// (1s, then 2s, 4s …) wait for it, requeueing the DaemonSet for the rest.
func TestFailedPodBackoff(t *testing.T) {
	ds := newDS("agent")
	f := newFixture(t, objs(ds, newNode("a"))...)
	failPod := func() {
		t.Helper()
		pods := f.apiPods()
		if len(pods) != 1 {
			t.Fatalf("%d pods, want 1", len(pods))
		}
		p := pods[0]
		p.Status.Phase = corev1.PodFailed
		if _, err := f.client.CoreV1().Pods("ns").UpdateStatus(t.Context(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.mustSync("agent") // creates the pod
	steps := []struct {
		advance     time.Duration
		wantDeleted bool
		wantRequeue time.Duration
	}{
		{0, true, 0}, // first failure: no back-off yet (window now 1s)
		{500 * time.Millisecond, false, time.Second}, // within 1s
		{500 * time.Millisecond, true, 0},            // 1s passed (window now 2s)
		{1500 * time.Millisecond, false, 2 * time.Second},
		{500 * time.Millisecond, true, 0}, // 2s passed (window now 4s)
		{3 * time.Second, false, 4 * time.Second},
	}
	failPod()
	for i, s := range steps {
		f.clock.Step(s.advance)
		before := f.countActions("delete", "pods")
		f.mu.Lock()
		f.requeues = nil
		f.mu.Unlock()
		f.c.forgetExpectations("ns/agent") // the fake client's events are not delivered
		f.mustSync("agent")
		deleted := f.countActions("delete", "pods") > before
		if deleted != s.wantDeleted {
			t.Fatalf("step %d: deleted %v, want %v", i, deleted, s.wantDeleted)
		}
		f.mu.Lock()
		requeues := slices.Clone(f.requeues)
		f.mu.Unlock()
		if s.wantRequeue > 0 && !slices.Contains(requeues, s.wantRequeue) {
			t.Errorf("step %d: requeues %v, want one after %v", i, requeues, s.wantRequeue)
		}
		if deleted {
			if !controllertest.HasEvent(f.events(),
				"Warning FailedDaemonPod Found failed daemon pod ns/") {
				t.Errorf("step %d: no FailedDaemonPod event", i)
			}
			f.c.forgetExpectations("ns/agent")
			f.mustSync("agent") // recreate
			failPod()
		}
	}
}

// TestSelectingAll: an empty selector is refused with an event and no
// writes.
func TestSelectingAll(t *testing.T) {
	f := newFixture(
		t,
		objs(
			newDS(
				"agent",
				func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			),
			newNode("a"),
		)...)
	f.mustSync("agent")
	if ev := f.events(); !controllertest.HasEvent(ev, "Warning SelectingAll") {
		t.Errorf("events %v", ev)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("unexpected action %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestAdoptsAndReleases: an orphan pod and an orphan revision that match
// are adopted; an owned pod that no longer matches is released.
func TestAdoptsAndReleases(t *testing.T) {
	ds := newDS("agent")
	h := podtemplate.Hash(&ds.Spec.Template, nil)
	orphan := daemonPod(
		"orphan",
		ds,
		"a",
		h,
		epoch.Add(-time.Hour),
		func(p *corev1.Pod) { p.OwnerReferences = nil },
	)
	stray := daemonPod(
		"stray",
		ds,
		"b",
		h,
		epoch.Add(-time.Hour),
		func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} },
	)
	data, err := podtemplate.RevisionPatch(ds)
	if err != nil {
		t.Fatal(err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent-" + h, UID: "uid-cr",
			Labels: map[string]string{"app": "agent", appsv1.DefaultDaemonSetUniqueLabelKey: h}},
		Data: runtime.RawExtension{Raw: data}, Revision: 1,
	}
	f := newFixture(t, objs(ds, newNode("a"), newNode("b"), orphan, stray, cr)...)
	f.mustSync("agent")
	patched := map[string]string{}
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			patched[p.GetResource().Resource+"/"+p.GetName()] = string(p.GetPatch())
		}
	}
	if len(patched) != 3 || patched["pods/orphan"] == "" || patched["pods/stray"] == "" ||
		patched["controllerrevisions/agent-"+h] == "" {
		t.Errorf(
			"patches %v, want adoption of the orphan pod and revision, release of the stray pod",
			patched,
		)
	}
	if n := f.countActions("create", "controllerrevisions"); n != 0 {
		t.Errorf("%d revisions created, want the adopted one reused", n)
	}
	// The released pod's node gets a pod of its own; the adopted one's
	// does not.
	if got := f.podNodes(false); !slices.Equal(got, []string{"a", "b", "b"}) {
		t.Errorf("pods on %v, want the adopted a, the released b and a new b", got)
	}
}
