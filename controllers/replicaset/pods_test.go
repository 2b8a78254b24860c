package replicaset

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

// rp builds a pod for ranking tests: named, created an hour before epoch.
func rp(name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(epoch.Add(-time.Hour)),
	}}
	for _, m := range mods {
		m(p)
	}
	return p
}

func onNode(n string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func phase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func ready(since time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{
			{
				Type:               corev1.PodReady,
				Status:             corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(since),
			},
		}
	}
}
func cost(v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.PodDeletionCost: v} }
}
func restarts(n int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: n}}
	}
}
func sidecarRestarts(n int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{
			{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
			{Name: "init"},
		}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{
			{Name: "side", RestartCount: n},
			{Name: "init", RestartCount: 100},
		}
	}
}
func created(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func TestPodsToDelete(t *testing.T) {
	running := phase(corev1.PodRunning)
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		related []*corev1.Pod
		diff    int
		noNow   bool // no reference time: exact comparisons
		noCost  bool
		want    []string
	}{
		{name: "unscheduled before scheduled", diff: 1,
			pods: []*corev1.Pod{rp("scheduled", onNode("n"), running), rp("unscheduled", running)},
			want: []string{"unscheduled"}},
		{name: "pending before unknown before running", diff: 2,
			pods: []*corev1.Pod{
				rp("running", onNode("n"), running),
				rp("unknown", onNode("n"), phase(corev1.PodUnknown)),
				rp("pending", onNode("n"), phase(corev1.PodPending)),
			},
			want: []string{"pending", "unknown"}},
		{name: "not ready before ready", diff: 1,
			pods: []*corev1.Pod{
				rp("ready", onNode("n"), running, ready(epoch.Add(-time.Hour))),
				rp("notready", onNode("n"), running),
			},
			want: []string{"notready"}},
		{name: "lower deletion cost first, over readiness time and co-location", diff: 1,
			pods: []*corev1.Pod{
				rp(
					"old-cheap",
					onNode("a"),
					running,
					ready(epoch.Add(-100*time.Hour)),
					cost("-10"),
				),
				rp("new-dear", onNode("b"), running, ready(epoch.Add(-time.Minute)), cost("10")),
			},
			related: []*corev1.Pod{rp("x", onNode("b")), rp("y", onNode("b"))},
			want:    []string{"old-cheap"}},
		{name: "deletion cost ignored with the feature off", diff: 1, noCost: true,
			pods: []*corev1.Pod{
				rp(
					"old-cheap",
					onNode("n"),
					running,
					ready(epoch.Add(-100*time.Hour)),
					cost("-10"),
				),
				rp("new-dear", onNode("n"), running, ready(epoch.Add(-time.Minute)), cost("10")),
			},
			want: []string{"new-dear"}},
		{name: "invalid deletion cost counts as zero", diff: 1,
			pods: []*corev1.Pod{
				rp("plus", onNode("n"), running, ready(epoch.Add(-100*time.Hour)), cost("+5")),
				rp(
					"zero-padded",
					onNode("n"),
					running,
					ready(epoch.Add(-100*time.Hour)),
					cost("05"),
				),
				rp("positive", onNode("n"), running, ready(epoch.Add(-time.Minute)), cost("1")),
			},
			want: []string{"plus"}}, // plus and zero-padded tie at 0; same ready time; UID decides
		{name: "more co-located related pods first", diff: 1,
			pods: []*corev1.Pod{
				rp("alone", onNode("a"), running),
				rp("crowded", onNode("b"), running),
			},
			related: []*corev1.Pod{
				rp("r1", onNode("b")),
				rp("r2", onNode("b")),
				rp("r3", onNode("a")),
				rp("r4", onNode("b"), phase(corev1.PodSucceeded)),
			},
			want: []string{"crowded"}},
		{name: "ready more recently first", diff: 1,
			pods: []*corev1.Pod{
				rp("long", onNode("n"), running, ready(epoch.Add(-10*time.Hour))),
				rp("recent", onNode("n"), running, ready(epoch.Add(-time.Minute))),
			},
			want: []string{"recent"}},
		{name: "ready times in the same log bucket: UID decides", diff: 1,
			pods: []*corev1.Pod{
				rp("b", onNode("n"), running, ready(epoch.Add(-65*time.Minute))),
				rp("a", onNode("n"), running, ready(epoch.Add(-70*time.Minute))),
			},
			want: []string{"a"}},
		{name: "without a reference time the exact ready time decides", diff: 1, noNow: true,
			pods: []*corev1.Pod{
				rp("a", onNode("n"), running, ready(epoch.Add(-70*time.Minute))),
				rp("b", onNode("n"), running, ready(epoch.Add(-65*time.Minute))),
			},
			want: []string{"b"}},
		{name: "more restarts first", diff: 1,
			pods: []*corev1.Pod{
				rp("calm", onNode("n"), running, restarts(1)),
				rp("flappy", onNode("n"), running, restarts(7)),
			},
			want: []string{"flappy"}},
		{name: "then more sidecar restarts first (plain init containers ignored)", diff: 1,
			pods: []*corev1.Pod{
				rp("calm", onNode("n"), running, restarts(1)),
				rp("side", onNode("n"), running, restarts(1), sidecarRestarts(3)),
			},
			want: []string{"side"}},
		{name: "newer first", diff: 1,
			pods: []*corev1.Pod{
				rp("old", onNode("n"), running, created(epoch.Add(-48*time.Hour))),
				rp("new", onNode("n"), running, created(epoch.Add(-time.Minute))),
			},
			want: []string{"new"}},
		{name: "all of them: no ranking needed", diff: 2,
			pods: []*corev1.Pod{rp("x"), rp("y")},
			want: []string{"x", "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := epoch
			if tt.noNow {
				now = time.Time{}
			}
			// Ranked as the host's informers hold them: pruned to what
			// the controller declares it reads.
			pods := controllertest.Pruned(t, Descriptor(Options{}), tt.pods...)
			related := controllertest.Pruned(t, Descriptor(Options{}), tt.related...)
			in := slices.Clone(pods)
			got := podsToDelete(pods, related, tt.diff, now, !tt.noCost)
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("podsToDelete = %v, want %v", names, tt.want)
			}
			if !slices.Equal(in, pods) {
				t.Error("podsToDelete reordered its input")
			}
		})
	}
}

func TestAvailability(t *testing.T) {
	readyAt := epoch.Add(-10 * time.Second)
	p := rp("p", ready(readyAt))
	tests := []struct {
		minReady  int32
		now       time.Time
		available bool
		until     *time.Duration
	}{
		{0, epoch, true, nil},
		{10, epoch, true, nil}, // exactly minReadySeconds
		{30, epoch, false, ptr.To(20 * time.Second)},
	}
	for _, tt := range tests {
		if got := podstate.IsAvailable(p, tt.minReady, tt.now); got != tt.available {
			t.Errorf("minReady %d: available %v, want %v", tt.minReady, got, tt.available)
		}
		if got := untilAvailable(p, tt.minReady, tt.now); !ptr.Equal(got, tt.until) {
			t.Errorf(
				"minReady %d: until %v, want %v",
				tt.minReady,
				ptr.Deref(got, -1),
				ptr.Deref(tt.until, -1),
			)
		}
	}
	if podstate.IsAvailable(rp("notready"), 0, epoch) {
		t.Error("a pod that is not ready is available")
	}
	// Evaluated a while ago; the moment passed meanwhile: check at once.
	if d := nextAvailabilityCheck([]*corev1.Pod{p}, 30, epoch, epoch.Add(time.Minute)); d == nil ||
		*d != 0 {
		t.Errorf("nextAvailabilityCheck = %v, want 0", d)
	}
	if d := nextAvailabilityCheck([]*corev1.Pod{p}, 30, epoch, epoch.Add(5*time.Second)); d == nil ||
		*d != 15*time.Second {
		t.Errorf("nextAvailabilityCheck = %v, want 15s", d)
	}
}

func TestDeletionCost(t *testing.T) {
	for v, want := range map[string]int32{"": 0, "0": 0, "-3": -3, "42": 42, "+1": 0, "007": 0, "x": 0, "99999999999": 0, "-01": -1} {
		p := rp("p")
		if v != "" {
			cost(v)(p)
		}
		if got := deletionCost(p); got != want {
			t.Errorf("deletionCost(%q) = %d, want %d", v, got, want)
		}
	}
}
