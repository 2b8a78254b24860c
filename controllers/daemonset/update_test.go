package daemonset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// round is what one sync of a rollout did and left.
type round struct {
	deleted, created int
	// unavailable: nodes without an available pod after the sync;
	// doubled: nodes with two pods after the sync.
	unavailable, doubled int
}

// rollout changes the template and then alternates sync and kubelet (every
// write observed between syncs) until every pod runs the new template,
// returning each sync's round.
func rollout(t *testing.T, f *fixture, nodeCount int) []round {
	t.Helper()
	f.changeTemplate("agent", "img:2")
	newHash := podtemplate.Hash(&f.ds("agent").Spec.Template, nil)
	var rounds []round
	for i := 0; i < 40; i++ {
		d0, c0 := f.countActions("delete", "pods"), f.countActions("create", "pods")
		f.c.forgetExpectations("ns/agent")
		f.mustSync("agent")
		r := round{
			deleted: f.countActions("delete", "pods") - d0,
			created: f.countActions("create", "pods") - c0,
		}
		perNode := map[string]int{}
		availableOn := map[string]bool{}
		allNew := true
		for _, p := range f.apiPods() {
			node, err := targetNode(&p)
			if err != nil {
				t.Fatal(err)
			}
			perNode[node]++
			if p.Spec.NodeName != "" && podstate.IsAvailable(&p, 0, f.clock.Now()) {
				availableOn[p.Spec.NodeName] = true
			}
			allNew = allNew && p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == newHash
		}
		for _, c := range perNode {
			if c > 1 {
				r.doubled++
			}
		}
		r.unavailable = nodeCount - len(availableOn)
		rounds = append(rounds, r)
		if allNew && len(f.apiPods()) == nodeCount && r.unavailable == 0 &&
			r.deleted+r.created == 0 {
			return rounds
		}
		f.kubelet()
	}
	t.Fatalf("the rollout did not finish: %+v", rounds)
	return nil
}

// TestRollingUpdateSteps: how many pods each sync of a rollout over four
// nodes replaces, for maxUnavailable and maxSurge settings.
func TestRollingUpdateSteps(t *testing.T) {
	tests := []struct {
		name                   string
		maxUnavailable, surge  intstr.IntOrString
		wantMaxUnavailable     int // most nodes without an available pod after any sync
		wantMaxDoubled         int // most nodes with an old and a new pod
		wantDeletesPerRound    int // most old pods deleted by one sync
		wantRoundsWithDeletion int
	}{
		{"maxUnavailable 1", intstr.FromInt32(1), intstr.FromInt32(0), 1, 0, 1, 4},
		{"maxUnavailable 2", intstr.FromInt32(2), intstr.FromInt32(0), 2, 0, 2, 2},
		{"maxUnavailable 50%", intstr.FromString("50%"), intstr.FromInt32(0), 2, 0, 2, 2},
		{
			"maxUnavailable 10% rounds up to 1",
			intstr.FromString("10%"),
			intstr.FromInt32(0),
			1,
			0,
			1,
			4,
		},
		{
			"maxUnavailable 0 and maxSurge 0 allow one",
			intstr.FromInt32(0),
			intstr.FromInt32(0),
			1,
			0,
			1,
			4,
		},
		{"maxSurge 1", intstr.FromInt32(0), intstr.FromInt32(1), 0, 1, 1, 4},
		{"maxSurge 2", intstr.FromInt32(0), intstr.FromInt32(2), 0, 2, 2, 2},
		{"maxSurge 100%", intstr.FromInt32(0), intstr.FromString("100%"), 0, 4, 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS("agent", func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr.To(tt.maxUnavailable),
					MaxSurge:       ptr.To(tt.surge),
				}
			})
			f := newFixture(t, objs(ds, nodes("a", "b", "c", "d")...)...)
			f.mustSync("agent")
			f.kubelet()
			var maxUnavail, maxDoubled, maxDeletes, deletionRounds int
			for _, r := range rollout(t, f, 4) {
				maxUnavail = max(maxUnavail, r.unavailable)
				maxDoubled = max(maxDoubled, r.doubled)
				maxDeletes = max(maxDeletes, r.deleted)
				if r.deleted > 0 {
					deletionRounds++
				}
			}
			if maxUnavail != tt.wantMaxUnavailable || maxDoubled != tt.wantMaxDoubled ||
				maxDeletes != tt.wantDeletesPerRound ||
				deletionRounds != tt.wantRoundsWithDeletion {
				t.Errorf(
					"most unavailable %d, doubled %d, deletes per sync %d, syncs deleting %d; want %d, %d, %d, %d",
					maxUnavail,
					maxDoubled,
					maxDeletes,
					deletionRounds,
					tt.wantMaxUnavailable,
					tt.wantMaxDoubled,
					tt.wantDeletesPerRound,
					tt.wantRoundsWithDeletion,
				)
			}
			if st := f.ds("agent").Status; st.UpdatedNumberScheduled != 4 ||
				st.NumberAvailable != 4 {
				t.Errorf("final status %+v", st)
			}
		})
	}
}

// TestRollingUpdateReplacesUnavailableOldPodsAtOnce: old pods that are not
// available do not count against maxUnavailable's room: they are all
// replaced in the first sync.
func TestRollingUpdateReplacesUnavailableOldPodsAtOnce(t *testing.T) {
	ds := newDS("agent")
	h := podtemplate.Hash(&ds.Spec.Template, nil)
	notReady := func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
	f := newFixture(t, objs(
		ds,
		newNode("a"),
		newNode("b"),
		newNode("c"),
		daemonPod(
			"pa",
			ds,
			"a",
			h,
			epoch,
			notReady,
		),
		daemonPod("pb", ds, "b", h, epoch, notReady),
		daemonPod("pc", ds, "c", h, epoch),
	)...)
	f.changeTemplate("agent", "img:2")
	f.mustSync("agent")
	if n := f.countActions("delete", "pods"); n != 2 {
		t.Errorf("%d deletes, want the two unavailable old pods", n)
	}
}

// TestOnDeleteReplacesNothing: under OnDelete a template change makes a new
// revision and leaves the pods; a deleted pod comes back new.
func TestOnDeleteReplacesNothing(t *testing.T) {
	ds := newDS("agent", func(ds *appsv1.DaemonSet) {
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{
			Type: appsv1.OnDeleteDaemonSetStrategyType,
		}
	})
	f := newFixture(t, objs(ds, nodes("a", "b")...)...)
	f.mustSync("agent")
	f.kubelet()
	f.changeTemplate("agent", "img:2")
	f.c.forgetExpectations("ns/agent")
	f.mustSync("agent")
	if n := f.countActions("delete", "pods"); n != 0 {
		t.Errorf("%d deletes under OnDelete", n)
	}
	if st := f.ds("agent").Status; st.UpdatedNumberScheduled != 0 || st.ObservedGeneration != 2 ||
		len(f.revisions()) != 2 {
		t.Errorf("status %+v, %d revisions", st, len(f.revisions()))
	}
	victim := f.apiPods()[0]
	if err := f.client.CoreV1().Pods("ns").Delete(t.Context(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.c.forgetExpectations("ns/agent")
	f.mustSync("agent")
	f.kubelet()
	f.mustSync("agent")
	if st := f.ds("agent").Status; st.UpdatedNumberScheduled != 1 {
		t.Errorf(
			"updatedNumberScheduled %d after one pod was deleted and recreated, want 1",
			st.UpdatedNumberScheduled,
		)
	}
}
