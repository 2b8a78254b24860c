package tainteviction

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
)

var (
	unreachable = corev1.Taint{Key: corev1.TaintNodeUnreachable,
		Effect: corev1.TaintEffectNoExecute}
	notReady = corev1.Taint{Key: corev1.TaintNodeNotReady,
		Effect: corev1.TaintEffectNoExecute}
	noSchedule = corev1.Taint{Key: "example.com/busy", Effect: corev1.TaintEffectNoSchedule}
)

// tolerate tolerates key's NoExecute taint for seconds (forever if nil).
func tolerate(key string, seconds *int64) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
}

func node(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{Taints: taints}}
}

func pod(name, nodeName string, tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: k8stypes.UID("uid-" + name),
			Generation: 2},
		Spec: corev1.PodSpec{NodeName: nodeName, Tolerations: tolerations,
			Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// fixture is a controller over listers of the pruned objects (as the
// host caches them), a fake clientset holding the whole ones, a fake clock
// and a buffered recorder.
type fixture struct {
	t        *testing.T
	c        *controller
	client   *fake.Clientset
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	podStore cache.Indexer
	nodes    cache.Indexer
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	d := Descriptor(NewOptions())
	f := &fixture{t: t, client: fake.NewClientset(objs...),
		clock:    clocktesting.NewFakeClock(controllertest.Epoch),
		recorder: record.NewFakeRecorder(100),
		podStore: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
			cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
			index.PodsByNode:     index.PodsByNodeIndexers()[index.PodsByNode]}),
		nodes: controllertest.ClusterIndexer[*corev1.Node](t),
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Pod:
			f.must(f.podStore.Add(controllertest.Pruned(t, d, o)[0]))
		case *corev1.Node:
			f.must(f.nodes.Add(controllertest.Pruned(t, d, o)[0]))
		}
	}
	m, err := metricsOn(nil)
	f.must(err)
	f.c = &controller{client: f.client, pods: corelisters.NewPodLister(f.podStore),
		podIndexer: f.podStore, nodes: corelisters.NewNodeLister(f.nodes),
		recorder: f.recorder, clock: f.clock, metrics: m, tainted: map[string][]corev1.Taint{}}
	f.c.evictions = newEvictions(f.clock, f.c.evict)
	t.Cleanup(f.c.evictions.stop)
	f.client.ClearActions()
	return f
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync(key string) {
	f.t.Helper()
	f.must(f.c.sync(controllertest.LogContext(f.t), key))
}

func (f *fixture) syncNode(name string) { f.t.Helper(); f.sync(nodePrefix + name) }

func (f *fixture) syncPod(p *corev1.Pod) {
	f.t.Helper()
	f.sync(podKeys(p)[0])
}

// setNode replaces the cached node.
func (f *fixture) setNode(n *corev1.Node) {
	f.t.Helper()
	f.must(f.nodes.Update(controllertest.Pruned(f.t, Descriptor(NewOptions()), n)[0]))
}

// setPod replaces the cached pod.
func (f *fixture) setPod(p *corev1.Pod) {
	f.t.Helper()
	f.must(f.podStore.Update(controllertest.Pruned(f.t, Descriptor(NewOptions()), p)[0]))
}

// deleted lists the pods deleted so far, sorted.
func (f *fixture) deleted() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			out = append(out, d.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// waitDeleted waits until the pods named are deleted (and no other).
func (f *fixture) waitDeleted(names ...string) {
	f.t.Helper()
	slices.Sort(names)
	controllertest.WaitFor(f.t, fmt.Sprintf("pods %q deleted", names), func() bool {
		return f.c.evictions.busy.Load() == 0 && slices.Equal(f.deleted(), names)
	})
}

// idle checks that nothing was deleted, once no deletion is running.
func (f *fixture) idle() {
	f.t.Helper()
	controllertest.WaitFor(f.t, "no deletion running", func() bool {
		return f.c.evictions.busy.Load() == 0
	})
	if d := f.deleted(); len(d) != 0 {
		f.t.Errorf("deleted %q, want none", d)
	}
}

func TestMinToleration(t *testing.T) {
	for _, tt := range []struct {
		name        string
		tolerations []corev1.Toleration
		want        time.Duration
		forever     bool
	}{
		{"none: at once", nil, 0, false},
		{"no seconds: forever",
			[]corev1.Toleration{tolerate("a", nil), tolerate("b", nil)}, 0, true},
		{"the shortest", []corev1.Toleration{tolerate("a", ptr.To[int64](30)),
			tolerate("b", nil), tolerate("c", ptr.To[int64](10))}, 10 * time.Second, false},
		{"zero: at once", []corev1.Toleration{tolerate("a", ptr.To[int64](0)),
			tolerate("b", ptr.To[int64](10))}, 0, false},
		{"negative: at once", []corev1.Toleration{tolerate("a", ptr.To[int64](-5))}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, forever := minToleration(tt.tolerations)
			if got != tt.want || forever != tt.forever {
				t.Errorf("minToleration = %v, %v; want %v, %v", got, forever, tt.want, tt.forever)
			}
		})
	}
}

// TestNodeTaints: what happens to a node's pods when it gets NoExecute
// taints, at once and as the fake clock runs.
func TestNodeTaints(t *testing.T) {
	tests := []struct {
		name   string
		taints []corev1.Taint
		pods   []*corev1.Pod
		now    []string // deleted at once
		after  time.Duration
		later  []string // deleted once after has passed too
	}{
		{name: "untolerated: deleted at once; tolerated forever: kept",
			taints: []corev1.Taint{unreachable},
			pods: []*corev1.Pod{pod("none", "n"), pod("forever", "n",
				tolerate(corev1.TaintNodeUnreachable, nil))},
			now: []string{"none"}, after: time.Hour, later: []string{"none"}},
		{name: "tolerated for a while: deleted after the toleration",
			taints: []corev1.Taint{unreachable},
			pods: []*corev1.Pod{pod("brief", "n",
				tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](30)))},
			after: 30 * time.Second, later: []string{"brief"}},
		{name: "two taints: the shortest toleration of those used",
			taints: []corev1.Taint{unreachable, notReady},
			pods: []*corev1.Pod{pod("p", "n",
				tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](60)),
				tolerate(corev1.TaintNodeNotReady, ptr.To[int64](20)),
				tolerate("unused", ptr.To[int64](1)))},
			after: 20 * time.Second, later: []string{"p"}},
		{name: "one of two taints untolerated: at once",
			taints: []corev1.Taint{unreachable, notReady},
			pods: []*corev1.Pod{pod("p", "n",
				tolerate(corev1.TaintNodeUnreachable, nil))},
			now: []string{"p"}, after: time.Second, later: []string{"p"}},
		{name: "a NoSchedule taint is not the controller's",
			taints: []corev1.Taint{noSchedule},
			pods:   []*corev1.Pod{pod("p", "n")}, after: time.Hour},
		{name: "zero seconds: at once",
			taints: []corev1.Taint{unreachable},
			pods: []*corev1.Pod{pod("p", "n",
				tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](0)))},
			now: []string{"p"}, after: time.Second, later: []string{"p"}},
		{name: "pods on other nodes and unbound pods are left alone",
			taints: []corev1.Taint{unreachable},
			pods:   []*corev1.Pod{pod("elsewhere", "m"), pod("unbound", "")}, after: time.Hour},
		{name: "a toleration for another value tolerates nothing",
			taints: []corev1.Taint{unreachable},
			pods: []*corev1.Pod{pod("p", "n", corev1.Toleration{
				Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpEqual,
				Value: "x", Effect: corev1.TaintEffectNoExecute})},
			now: []string{"p"}, after: time.Second, later: []string{"p"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{node("n", tt.taints...), node("m")}
			for _, p := range tt.pods {
				objs = append(objs, p)
			}
			f := newFixture(t, objs...)
			f.syncNode("n")
			f.syncNode("m")
			f.waitDeleted(tt.now...)
			f.clock.Step(tt.after - time.Millisecond)
			f.waitDeleted(tt.now...)
			f.clock.Step(time.Millisecond)
			f.waitDeleted(tt.later...)
		})
	}
}

// TestDeletion: a deletion records the event, patches the condition with
// the pod's UID as a precondition, deletes, and counts.
func TestDeletion(t *testing.T) {
	p := pod("p", "n", tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](5)))
	f := newFixture(t, node("n", unreachable), p)
	f.syncNode("n")
	f.clock.Step(5 * time.Second)
	f.waitDeleted("p")
	if got := controllertest.Actions(f.client); !slices.Equal(got,
		[]string{"get pods", "patch pods/status", "delete pods"}) {
		t.Errorf("actions %q, want a get, a status patch and a delete", got)
	}
	patch := f.client.Actions()[1].(k8stesting.PatchAction)
	var doc struct {
		Metadata struct{ UID string } `json:"metadata"`
		Status   struct {
			Conditions []corev1.PodCondition `json:"conditions"`
		} `json:"status"`
	}
	f.must(json.Unmarshal(patch.GetPatch(), &doc))
	if doc.Metadata.UID != "uid-p" {
		t.Errorf("patch %s: no UID precondition", patch.GetPatch())
	}
	want := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		ObservedGeneration: 2, Reason: ConditionReason, Message: conditionMessage,
		LastTransitionTime: metav1.NewTime(controllertest.Epoch.Add(5 * time.Second))}
	if len(doc.Status.Conditions) != 1 || !doc.Status.Conditions[0].LastTransitionTime.Equal(
		&want.LastTransitionTime) || doc.Status.Conditions[0].Reason != want.Reason ||
		doc.Status.Conditions[0].Message != want.Message ||
		doc.Status.Conditions[0].ObservedGeneration != 2 {
		t.Errorf("patched conditions %+v, want [%+v]", doc.Status.Conditions, want)
	}
	if got := controllertest.Events(f.recorder); !slices.Equal(got,
		[]string{"Normal TaintManagerEviction Marking for deletion Pod ns/p"}) {
		t.Errorf("events %q", got)
	}
	if n := counted(t, f.c.metrics.deletions); n != 1 {
		t.Errorf("pod_deletions_total = %v, want 1", n)
	}
	var m dto.Metric
	f.must(f.c.metrics.latency.(prometheus.Metric).Write(&m))
	if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() > 1 {
		t.Errorf("pod_deletion_duration_seconds: %d samples summing to %vs, want 1 "+
			"under a second", h.GetSampleCount(), h.GetSampleSum())
	}
}

func TestWithDisruptionTarget(t *testing.T) {
	then := metav1.NewTime(controllertest.Epoch.Add(-time.Hour))
	now := controllertest.Epoch
	cond := func(status corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.DisruptionTarget, Status: status,
			Reason: reason, Message: conditionMessage, LastTransitionTime: then}
	}
	for _, tt := range []struct {
		name     string
		have     []corev1.PodCondition
		changed  bool
		wantTime metav1.Time
	}{
		{"added", nil, true, metav1.NewTime(now)},
		{"the same: unchanged", []corev1.PodCondition{cond(corev1.ConditionTrue,
			ConditionReason)}, false, then},
		{"another reason: replaced, its time kept", []corev1.PodCondition{
			cond(corev1.ConditionTrue, "Other")}, true, then},
		{"was false: replaced, now", []corev1.PodCondition{cond(corev1.ConditionFalse,
			ConditionReason)}, true, metav1.NewTime(now)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("p", "n")
			p.Status.Conditions = append([]corev1.PodCondition{{Type: corev1.PodReady,
				Status: corev1.ConditionFalse}}, tt.have...)
			status, changed := withDisruptionTarget(p, now)
			if changed != tt.changed {
				t.Errorf("changed = %v, want %v", changed, tt.changed)
			}
			if len(status.Conditions) != 2 || status.Conditions[0].Type != corev1.PodReady {
				t.Fatalf("conditions %+v", status.Conditions)
			}
			got := status.Conditions[1]
			if got.Reason != ConditionReason || got.Status != corev1.ConditionTrue ||
				!got.LastTransitionTime.Equal(&tt.wantTime) || got.ObservedGeneration != 2 {
				t.Errorf("condition %+v, want reason %s at %v", got, ConditionReason, tt.wantTime)
			}
		})
	}
}

// TestDeletionOfAMarkedPod: a pod that has the condition already is only
// deleted.
func TestDeletionOfAMarkedPod(t *testing.T) {
	p := pod("p", "n")
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget,
		Status: corev1.ConditionTrue, Reason: ConditionReason, Message: conditionMessage}}
	f := newFixture(t, node("n", unreachable), p)
	f.syncNode("n")
	f.waitDeleted("p")
	if got := controllertest.Actions(f.client); !slices.Equal(got,
		[]string{"get pods", "delete pods"}) {
		t.Errorf("actions %q, want a get and a delete", got)
	}
}

// TestDeletionRetries: five attempts, then the error; a pod gone is an
// error too (logged), as in KCM.
func TestDeletionRetries(t *testing.T) {
	for _, tt := range []struct {
		name     string
		failures int
		want     float64 // deletions counted
	}{
		{"succeeds on the fifth attempt", 4, 1},
		{"fails five times", 5, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, node("n", unreachable), pod("p", "n"))
			failed := 0
			f.client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool,
				runtime.Object, error) {
				if failed < tt.failures {
					failed++
					return true, nil, errors.New("injected")
				}
				return false, nil, nil
			})
			f.syncNode("n")
			controllertest.WaitFor(t, "the deletion to end", func() bool {
				return f.c.evictions.len() == 0
			})
			if n := controllertest.CountActions(f.client, "delete", "pods"); n != min(
				tt.failures+1, deleteAttempts) {
				t.Errorf("%d deletes, want %d", n, min(tt.failures+1, deleteAttempts))
			}
			if n := counted(t, f.c.metrics.deletions); n != tt.want {
				t.Errorf("pod_deletions_total = %v, want %v", n, tt.want)
			}
		})
	}
	f := newFixture(t, node("n", unreachable))
	f.must(f.podStore.Add(pod("gone", "n")))
	f.syncNode("n")
	controllertest.WaitFor(t, "the deletion to end", func() bool {
		return f.c.evictions.len() == 0
	})
	if n := controllertest.CountActions(f.client, "get", "pods"); n != deleteAttempts {
		t.Errorf("%d gets of a pod gone, want %d", n, deleteAttempts)
	}
}

// TestCancellation: a scheduled deletion goes when the taints go, when the
// pod goes, or when the pod comes to tolerate them forever; with an event.
func TestCancellation(t *testing.T) {
	brief := pod("p", "n", tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](30)))
	for _, tt := range []struct {
		name   string
		cancel func(f *fixture)
	}{
		{"the taints removed", func(f *fixture) {
			f.setNode(node("n", noSchedule))
			f.syncNode("n")
		}},
		{"the pod deleted", func(f *fixture) {
			f.must(f.podStore.Delete(brief))
			f.syncPod(brief)
		}},
		{"the pod tolerates forever", func(f *fixture) {
			p := pod("p", "n", tolerate(corev1.TaintNodeUnreachable, nil))
			f.setPod(p)
			f.syncPod(p)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, node("n", unreachable), brief)
			f.syncNode("n")
			if f.c.evictions.len() != 1 {
				t.Fatal("no deletion scheduled")
			}
			f.clock.Step(29 * time.Second)
			tt.cancel(f)
			if got := controllertest.Events(f.recorder); !slices.Equal(got,
				[]string{"Normal TaintManagerEviction Cancelling deletion of Pod ns/p"}) {
				t.Errorf("events %q", got)
			}
			if f.clock.HasWaiters() {
				t.Error("the timer was not stopped")
			}
			f.clock.Step(time.Hour)
			if f.c.evictions.len() != 0 {
				t.Error("a deletion is still scheduled")
			}
			f.idle()
		})
	}
}

// TestScheduledDeletionStays: a deletion scheduled is not moved by a
// later decision that tolerates the pod for a while, whether longer or
// shorter (KCM's rule); a node update that leaves it tolerated neither.
func TestScheduledDeletionStays(t *testing.T) {
	for _, seconds := range []int64{10, 300} {
		t.Run(fmt.Sprint(seconds), func(t *testing.T) {
			f := newFixture(t, node("n", unreachable),
				pod("p", "n", tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](60))))
			f.syncNode("n")
			f.clock.Step(30 * time.Second)
			p := pod("p", "n", tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](seconds)))
			f.setPod(p)
			f.syncPod(p)
			f.setNode(node("n", unreachable, noSchedule))
			f.syncNode("n")
			if got := controllertest.Events(f.recorder); len(got) != 0 {
				t.Errorf("events %q, want none", got)
			}
			f.clock.Step(30*time.Second - time.Millisecond)
			f.idle()
			f.clock.Step(time.Millisecond)
			f.waitDeleted("p")
		})
	}
}

// TestTolerationsChange: a pod whose new tolerations no longer tolerate
// the taints is deleted at once, its scheduled deletion cancelled.
func TestTolerationsChange(t *testing.T) {
	f := newFixture(t, node("n", unreachable),
		pod("p", "n", tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](60))))
	f.syncNode("n")
	p := pod("p", "n", tolerate(corev1.TaintNodeNotReady, nil))
	f.setPod(p)
	f.syncPod(p)
	f.waitDeleted("p")
	if got := controllertest.Events(f.recorder); !slices.Equal(got, []string{
		"Normal TaintManagerEviction Cancelling deletion of Pod ns/p",
		"Normal TaintManagerEviction Marking for deletion Pod ns/p"}) {
		t.Errorf("events %q", got)
	}
}

// TestPodEvents: a pod's own events decide it against the known taints:
// one bound later to a tainted node; one whose key names the node it left.
func TestPodEvents(t *testing.T) {
	unbound := pod("p", "")
	f := newFixture(t, node("n", unreachable), unbound)
	f.syncNode("n")
	f.syncPod(unbound)
	f.idle()
	bound := pod("p", "n")
	f.setPod(bound)
	f.syncPod(unbound) // the old key: not this one's to decide
	f.idle()
	f.syncPod(bound)
	f.waitDeleted("p")

	// A pod on a node without NoExecute taints, or a node gone.
	f = newFixture(t, node("n"), pod("p", "n"), pod("q", "gone"))
	f.syncNode("n")
	f.syncPod(pod("p", "n"))
	f.syncPod(pod("q", "gone"))
	f.idle()
}

// TestNodeDeletion: a node deleted forgets its taints; its pods'
// deletions stand, as in KCM.
func TestNodeDeletion(t *testing.T) {
	n := node("n", unreachable)
	f := newFixture(t, n, pod("p", "n", tolerate(corev1.TaintNodeUnreachable,
		ptr.To[int64](10))))
	f.syncNode("n")
	f.must(f.nodes.Delete(n))
	f.syncNode("n")
	if _, ok := f.c.taintsOf("n"); ok {
		t.Error("the deleted node's taints are still known")
	}
	f.clock.Step(10 * time.Second)
	f.waitDeleted("p")
}

func TestComparisonOperators(t *testing.T) {
	taint := corev1.Taint{Key: "example.com/score", Value: "5",
		Effect: corev1.TaintEffectNoExecute}
	gt := corev1.Toleration{Key: "example.com/score", Operator: corev1.TolerationOpGt,
		Value: "3", Effect: corev1.TaintEffectNoExecute}
	for _, on := range []bool{false, true} {
		f := newFixture(t)
		f.c.comparisons = on
		_, all := f.c.matching(controllertest.LogContext(t), []corev1.Taint{taint},
			[]corev1.Toleration{gt})
		if all != on {
			t.Errorf("gate %v: tolerated = %v, want %v", on, all, on)
		}
	}
}

func TestFilters(t *testing.T) {
	p := pod("p", "n", tolerate("a", nil))
	other := p.DeepCopy()
	other.Status.Phase = corev1.PodFailed
	other.Labels = map[string]string{"x": "y"}
	moved := p.DeepCopy()
	moved.Spec.NodeName = "m"
	retolerated := p.DeepCopy()
	retolerated.Spec.Tolerations[0].TolerationSeconds = ptr.To[int64](1)
	empty, none := pod("e", "n"), pod("e", "n")
	empty.Spec.Tolerations = []corev1.Toleration{}
	for _, tt := range []struct {
		name     string
		old, obj any
		want     bool
	}{
		{"add", nil, p, true},
		{"delete", nil, p, true},
		{"status and labels", p, other, false},
		{"node", p, moved, true},
		{"tolerations", p, retolerated, true},
		{"nil and empty tolerations", none, empty, false},
	} {
		if got := podChanged(tt.old, tt.obj); got != tt.want {
			t.Errorf("podChanged, %s = %v, want %v", tt.name, got, tt.want)
		}
	}
	n := node("n", noSchedule)
	for _, tt := range []struct {
		name     string
		old, obj any
		want     bool
	}{
		{"add", nil, n, true},
		{"a NoSchedule taint", n, node("n"), false},
		{"a NoExecute taint", n, node("n", noSchedule, unreachable), true},
		{"its time", node("n", unreachable), node("n", corev1.Taint{
			Key: unreachable.Key, Effect: unreachable.Effect,
			TimeAdded: ptr.To(metav1.Now())}), true},
	} {
		if got := taintsChanged(tt.old, tt.obj); got != tt.want {
			t.Errorf("taintsChanged, %s = %v, want %v", tt.name, got, tt.want)
		}
	}
	if k := podKeys(p); !slices.Equal(k, []string{"pod/ns/p/n"}) {
		t.Errorf("podKeys = %q", k)
	}
	if k := nodeKeys(n); !slices.Equal(k, []string{"node/n"}) {
		t.Errorf("nodeKeys = %q", k)
	}
}

func TestMalformedKey(t *testing.T) {
	f := newFixture(t)
	for _, key := range []string{"pod/ns", "other/x"} {
		err := f.c.sync(controllertest.LogContext(t), key)
		if err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("sync(%q) = %v, want a malformed-key error", key, err)
		}
	}
}

// TestStatusPatch: the patch sets the condition and carries the UID.
func TestStatusPatch(t *testing.T) {
	p := pod("p", "n")
	status, _ := withDisruptionTarget(p, controllertest.Epoch)
	patch, err := statusPatch(p, status)
	if err != nil {
		t.Fatal(err)
	}
	before, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	after, err := strategicpatch.StrategicMergePatch(before, patch, corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(after, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 ||
		got.Status.Conditions[0].Type != corev1.DisruptionTarget ||
		!strings.Contains(string(patch), `"uid":"uid-p"`) {
		t.Errorf("patch %s gives conditions %+v", patch, got.Status.Conditions)
	}
}

// counted is a counter's value.
func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestStop: stopping cancels the deletions waiting, without events, and
// schedules nothing more.
func TestStop(t *testing.T) {
	f := newFixture(t, node("n", unreachable),
		pod("p", "n", tolerate(corev1.TaintNodeUnreachable, ptr.To[int64](60))))
	f.syncNode("n")
	f.c.evictions.stop()
	if f.clock.HasWaiters() || f.c.evictions.len() != 0 {
		t.Error("a deletion is still waiting after stop")
	}
	f.c.evictions.schedule(t.Context(), "ns/p", controllertest.Epoch, controllertest.Epoch)
	f.clock.Step(time.Hour)
	f.idle()
	if got := controllertest.Events(f.recorder); len(got) != 0 {
		t.Errorf("events %q, want none", got)
	}
}

// TestDeletionStartedAtOnce: a deletion running cannot be cancelled (no
// event); a new decision while it runs forgets it and starts another, as
// in KCM (the later of the two finds the pod gone).
func TestDeletionStartedAtOnce(t *testing.T) {
	f := newFixture(t, node("n", unreachable), pod("p", "n"))
	release := make(chan struct{})
	f.client.PrependReactor("get", "pods", func(k8stesting.Action) (bool,
		runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	f.syncNode("n")
	f.syncNode("n")
	if f.c.evictions.cancel("ns/p") {
		t.Error("a running deletion said it was cancelled")
	}
	close(release)
	controllertest.WaitFor(t, "the deletions to end", func() bool {
		return f.c.evictions.busy.Load() == 0
	})
	if _, err := f.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"),
		"ns", "p"); err == nil {
		t.Error("the pod was not deleted")
	}
	if got := controllertest.Events(f.recorder); len(got) != 2 {
		t.Errorf("events %q, want two markings", got)
	}
}
