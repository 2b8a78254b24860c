package nodelifecycle

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// TestSilentNodeGoesUnknown: a node whose Lease stops is marked Unknown
// after the grace period, its pods not ready, and (its zone keeping a
// Ready node) it is tainted unreachable, NoSchedule and NoExecute.
func TestSilentNodeGoesUnknown(t *testing.T) {
	f := newFixture(t, testOptions(),
		readyNode("a", "z"), readyNode("b", "z"), lease("a", epoch), lease("b", epoch),
		readyPod("on-a", "a"), readyPod("on-b", "b"))
	f.pass()
	// Both renew for a while: nothing is written.
	for range 3 {
		f.clock.Step(5 * time.Second)
		f.renew("a")
		f.renew("b")
		f.pass()
	}
	if n := f.node("a"); readyCondition(&n.Status).Status != corev1.ConditionTrue {
		t.Fatalf("a renewing node was marked %v", readyCondition(&n.Status).Status)
	}
	// a stops; b goes on.
	f.clock.Step(6 * time.Second)
	f.renew("b")
	f.pass()
	if n := f.node("a"); readyCondition(&n.Status).Status != corev1.ConditionTrue {
		t.Fatal("marked Unknown within the grace period")
	}
	f.clock.Step(5 * time.Second)
	f.renew("b")
	f.pass()
	a := f.node("a")
	for _, c := range a.Status.Conditions {
		want := corev1.ConditionUnknown
		if c.Type == corev1.NodeNetworkUnavailable {
			want = corev1.ConditionFalse
		}
		if c.Status != want {
			t.Errorf("condition %s = %s, want %s", c.Type, c.Status, want)
		}
		if want == corev1.ConditionUnknown && (c.Reason != reasonUnknown ||
			c.Message != messageUnknown || !c.LastTransitionTime.Time.Equal(f.clock.Now())) {
			t.Errorf("condition %s: %q %q %v", c.Type, c.Reason, c.Message,
				c.LastTransitionTime)
		}
	}
	if got := podReady(f.pod("default", "on-a")); got != corev1.ConditionFalse {
		t.Errorf("pod on a: Ready %s, want False", got)
	}
	if got := podReady(f.pod("default", "on-b")); got != corev1.ConditionTrue {
		t.Errorf("pod on b: Ready %s, want True", got)
	}
	f.taintPass()
	if got := taintKeys(f.node("a")); !slices.Equal(got,
		[]string{"node.kubernetes.io/unreachable:NoExecute"}) {
		t.Errorf("taints of a = %v", got)
	}
	if err := f.c.syncNode(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	if got := taintKeys(f.node("a")); !slices.Equal(got, []string{
		"node.kubernetes.io/unreachable:NoExecute",
		"node.kubernetes.io/unreachable:NoSchedule"}) {
		t.Errorf("taints of a = %v", got)
	}
	if got := taintKeys(f.node("b")); len(got) != 0 {
		t.Errorf("taints of b = %v", got)
	}
	events := drain(f)
	for _, want := range []string{"Normal RegisteredNode Node a event: Registered Node a",
		"Normal NodeNotReady Node a status is now: NodeNotReady",
		"Warning NodeNotReady Node is not ready"} {
		if !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, want) }) {
			t.Errorf("no event %q in %q", want, events)
		}
	}
	// a comes back: its NoExecute taint goes.
	f.renew("a")
	n := f.node("a")
	readyCondition(&n.Status).Status = corev1.ConditionTrue
	readyCondition(&n.Status).LastHeartbeatTime = metav1.NewTime(f.clock.Now())
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(context.Background(), n,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.pass()
	if got := taintKeys(f.node("a")); !slices.Equal(got,
		[]string{"node.kubernetes.io/unreachable:NoSchedule"}) {
		t.Errorf("taints of a back = %v", got)
	}
}

func drain(f *fixture) []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestFullDisruption: the only node of the cluster going silent is not
// tainted NoExecute: every zone is fully disrupted.
func TestFullDisruption(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("a", "z"), lease("a", epoch),
		readyPod("p", "a"))
	f.pass()
	f.clock.Step(11 * time.Second)
	f.pass()
	f.taintPass()
	if got := readyCondition(&f.node("a").Status).Status; got != corev1.ConditionUnknown {
		t.Fatalf("Ready = %s", got)
	}
	if got := taintKeys(f.node("a")); len(got) != 0 {
		t.Errorf("taints = %v, want none in full disruption", got)
	}
	for zone, s := range f.c.zoneStates {
		if s != stateFullDisruption {
			t.Errorf("zone %q: %s", zone, s)
		}
		if r := f.c.zoneQueues[zone].rate(); r != 1 { // a stopped limiter says 1
			t.Errorf("zone %q rate %v", zone, r)
		}
	}
	if got := podReady(f.pod("default", "p")); got != corev1.ConditionFalse {
		t.Errorf("pod Ready %s", got)
	}
}

// TestNeverPosted: a node without conditions gets them, Unknown, after
// the startup grace period.
func TestNeverPosted(t *testing.T) {
	n := readyNode("a", "")
	n.Status.Conditions = nil
	f := newFixture(t, testOptions(), n)
	f.pass()
	f.clock.Step(15 * time.Second)
	f.pass()
	if got := f.node("a").Status.Conditions; len(got) != 0 {
		t.Fatalf("written within the startup grace period: %v", got)
	}
	f.clock.Step(6 * time.Second)
	f.pass()
	got := f.node("a").Status.Conditions
	if len(got) != 4 {
		t.Fatalf("conditions = %v", got)
	}
	for _, c := range got {
		if c.Status != corev1.ConditionUnknown || c.Reason != reasonNeverUpdated ||
			c.Message != messageNeverUpdated || !c.LastHeartbeatTime.Equal(&n.CreationTimestamp) {
			t.Errorf("condition %+v", c)
		}
	}
}

// TestCircuitBreaker: a cached Lease that looks expired while the live
// one moved on is not trusted.
func TestCircuitBreaker(t *testing.T) {
	for _, on := range []bool{true, false} {
		f := newFixture(t, testOptions(), readyNode("a", "z"), readyNode("b", "z"),
			lease("a", epoch), lease("b", epoch))
		f.c.breaker = on
		f.pass()
		// The live Lease of a is renewed; the cache does not see it.
		l := lease("a", epoch.Add(time.Second))
		l.ResourceVersion = "42"
		if err := f.client.Tracker().Update(
			coordGVR, l, corev1.NamespaceNodeLease); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(11 * time.Second)
		if err := f.c.monitorNodeHealth(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := readyCondition(&f.node("a").Status).Status
		if want := map[bool]corev1.ConditionStatus{true: corev1.ConditionTrue,
			false: corev1.ConditionUnknown}[on]; got != want {
			t.Errorf("breaker %v: Ready = %s, want %s", on, got, want)
		}
	}
}

// TestNoScheduleTaints: condition and unschedulable taints follow the
// node; others are left alone.
func TestNoScheduleTaints(t *testing.T) {
	other := corev1.Taint{Key: "example.com/x", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name   string
		edit   func(*corev1.Node)
		taints []corev1.Taint
		want   []string
	}{
		{"ready: none", func(*corev1.Node) {}, nil, nil},
		{"not ready", func(n *corev1.Node) {
			readyCondition(&n.Status).Status = corev1.ConditionFalse
		}, nil, []string{"node.kubernetes.io/not-ready:NoSchedule"}},
		{"pressure and unschedulable", func(n *corev1.Node) {
			nodeCondition(&n.Status, corev1.NodeMemoryPressure).Status = corev1.ConditionTrue
			nodeCondition(&n.Status, corev1.NodePIDPressure).Status = corev1.ConditionTrue
			nodeCondition(&n.Status, corev1.NodeNetworkUnavailable).Status =
				corev1.ConditionTrue
			n.Spec.Unschedulable = true
		}, []corev1.Taint{other}, []string{"example.com/x:NoSchedule",
			"node.kubernetes.io/memory-pressure:NoSchedule",
			"node.kubernetes.io/pid-pressure:NoSchedule",
			"node.kubernetes.io/network-unavailable:NoSchedule",
			"node.kubernetes.io/unschedulable:NoSchedule"}},
		{"stale ones removed, NoExecute kept", func(*corev1.Node) {}, []corev1.Taint{
			{Key: corev1.TaintNodeDiskPressure, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			unreachableTaint, other,
		}, []string{"node.kubernetes.io/unreachable:NoExecute", "example.com/x:NoSchedule"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := readyNode("a", "")
			n.Spec.Taints = tc.taints
			tc.edit(n)
			f := newFixture(t, testOptions(), n)
			if err := f.c.syncNode(context.Background(), "a"); err != nil {
				t.Fatal(err)
			}
			if got := taintKeys(f.node("a")); !slices.Equal(got, tc.want) {
				t.Errorf("taints = %v, want %v", got, tc.want)
			}
			for _, tt := range f.node("a").Spec.Taints {
				if tt.Key != other.Key && tt.Key != corev1.TaintNodeUnreachable &&
					(tt.TimeAdded == nil || !tt.TimeAdded.Time.Equal(epoch)) {
					t.Errorf("taint %s added at %v", tt.Key, tt.TimeAdded)
				}
			}
		})
	}
}

// TestBetaLabels: the beta OS and arch labels follow the stable ones.
func TestBetaLabels(t *testing.T) {
	n := readyNode("a", "")
	n.Labels[corev1.LabelOSStable] = "linux"
	n.Labels[corev1.LabelArchStable] = "arm64"
	n.Labels["beta.kubernetes.io/arch"] = "amd64"
	f := newFixture(t, testOptions(), n)
	if err := f.c.syncNode(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	l := f.node("a").Labels
	if l["beta.kubernetes.io/os"] != "linux" || l["beta.kubernetes.io/arch"] != "arm64" {
		t.Errorf("labels = %v", l)
	}
}

// TestComputeZoneState: KCM's thresholds.
func TestComputeZoneState(t *testing.T) {
	c := &controller{o: NewOptions()}
	cond := func(s corev1.ConditionStatus) *corev1.NodeCondition {
		return &corev1.NodeCondition{Type: corev1.NodeReady, Status: s}
	}
	T, F, U := cond(corev1.ConditionTrue), cond(corev1.ConditionFalse),
		cond(corev1.ConditionUnknown)
	tests := []struct {
		conds     []*corev1.NodeCondition
		unhealthy int
		want      zoneState
	}{
		{[]*corev1.NodeCondition{T, T}, 0, stateNormal},
		{[]*corev1.NodeCondition{F, U}, 2, stateFullDisruption},
		{[]*corev1.NodeCondition{nil}, 1, stateFullDisruption},
		{[]*corev1.NodeCondition{T, F, U}, 2, stateNormal},
		{[]*corev1.NodeCondition{T, T, F, U, nil}, 3, statePartialDisruption},
		{[]*corev1.NodeCondition{T, T, T, F, U, nil}, 3, stateNormal},
	}
	for i, tc := range tests {
		n, s := c.computeZoneState(tc.conds)
		if n != tc.unhealthy || s != tc.want {
			t.Errorf("%d: got %d %s, want %d %s", i, n, s, tc.unhealthy, tc.want)
		}
	}
	c.o.LargeClusterSizeThreshold = 2
	if got := c.reducedQPS(3); got != c.o.SecondaryNodeEvictionRate {
		t.Errorf("large zone rate %v", got)
	}
	if got := c.reducedQPS(2); got != 0 {
		t.Errorf("small zone rate %v", got)
	}
}

// TestPodBoundToNotReadyNode: a pod bound after its node went Unknown is
// marked not ready by the pod worker.
func TestPodBoundToNotReadyNode(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("a", "z"), readyNode("b", "z"),
		lease("a", epoch), lease("b", epoch))
	f.pass()
	f.clock.Step(11 * time.Second)
	f.renew("b")
	f.pass()
	for _, p := range []*corev1.Pod{readyPod("late", "a"), readyPod("fine", "b")} {
		if _, err := f.client.CoreV1().Pods("default").Create(context.Background(), p,
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.refresh()
	for _, k := range []string{"default/late", "default/fine", "default/gone"} {
		if err := f.c.syncPod(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	if got := podReady(f.pod("default", "late")); got != corev1.ConditionFalse {
		t.Errorf("late: %s", got)
	}
	if got := podReady(f.pod("default", "fine")); got != corev1.ConditionTrue {
		t.Errorf("fine: %s", got)
	}
}

// TestMarkPodsNotReadyRetried: a failed pod write is retried next pass.
func TestMarkPodsNotReadyRetried(t *testing.T) {
	f := newFixture(t, testOptions(), readyNode("a", "z"), readyNode("b", "z"),
		lease("a", epoch), lease("b", epoch), readyPod("p", "a"))
	fail := true
	f.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool,
		runtime.Object, error) {
		if fail {
			return true, nil, errBoom
		}
		return false, nil, nil
	})
	f.pass()
	f.clock.Step(11 * time.Second)
	f.renew("b")
	f.pass()
	if _, ok := f.c.nodesToRetry.Load("a"); !ok {
		t.Fatal("a not queued for retry")
	}
	fail = false
	f.clock.Step(time.Second)
	f.renew("b")
	f.pass()
	if got := podReady(f.pod("default", "p")); got != corev1.ConditionFalse {
		t.Errorf("pod Ready %s after retry", got)
	}
	if _, ok := f.c.nodesToRetry.Load("a"); ok {
		t.Error("a still queued for retry")
	}
}

// TestZoneQueueRate: one node per token; a stopped zone taints none.
func TestZoneQueueRate(t *testing.T) {
	f := newFixture(t, testOptions())
	q := newZoneQueue(f.clock, 0.1)
	for _, n := range []string{"a", "b"} {
		if !q.add(n, "") {
			t.Fatalf("%s not added", n)
		}
	}
	if q.add("a", "") {
		t.Error("a added twice")
	}
	var done []string
	try := func() {
		q.try(func(v timedNode) (bool, time.Duration) {
			done = append(done, v.name)
			return true, 0
		})
	}
	try()
	if !slices.Equal(done, []string{"a"}) {
		t.Fatalf("first try: %v", done)
	}
	try()
	if len(done) != 1 {
		t.Fatalf("no token, yet: %v", done)
	}
	f.clock.Step(10 * time.Second)
	try()
	if !slices.Equal(done, []string{"a", "b"}) {
		t.Fatalf("after 10s: %v", done)
	}
	if q.add("a", "") {
		t.Error("a processed is still a member: not added again until removed")
	}
	q.remove("a")
	if !q.add("a", "") {
		t.Error("a removed, not added again")
	}
	q.swapLimiter(0)
	f.clock.Step(time.Minute)
	try()
	if len(done) != 2 {
		t.Errorf("a stopped zone tainted: %v", done)
	}
	// A failed attempt is tried again after its wait.
	q.swapLimiter(100)
	q.try(func(timedNode) (bool, time.Duration) { return false, time.Second })
	f.clock.Step(2 * time.Second)
	try()
	if !slices.Equal(done, []string{"a", "b", "a"}) {
		t.Errorf("retry: %v", done)
	}
}
